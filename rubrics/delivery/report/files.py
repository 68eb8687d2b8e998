"""`rubric report`: read a delivery's inputs, write report.md, report.json and the SVG chart beside it."""
from __future__ import annotations

from pathlib import Path

from rubrics.delivery.pass_rates.records import PassRates
from rubrics.delivery.tasks.catalog import load_catalog
from rubrics.delivery.report.chart_svg import ChartTask, pass_rate_svg
from rubrics.delivery.tasks.folder_check import check_task_folder
from rubrics.delivery.tasks.layout import REPORT_FILE
from rubrics.rubric.problems import ERROR, Problem
from rubrics.delivery.report.build import CHART_FILE, ReportInputs, build_report
from rubrics.delivery.report.markdown import render_markdown
from rubrics.delivery.tasks.removal_reasons import REMOVAL_FILE, read_removal
from rubrics.delivery.report.records import DeliveryReport
from rubrics.delivery.split.heldout import read_plan
from rubrics.delivery.runs.validate import VALIDATION_FILE
from rubrics.delivery.runs.validation_records import ValidationReport

REPORT_JSON = "report.json"
PASS_RATES_FILE = "pass_rates.json"   # what `rubric pass-rates` writes
OLD_PASS_RATES_FILE = "calibration.json"   # its name from `rubric calibrate`: still read where the new one is absent


def pass_rates_file(root: Path) -> tuple[Path, str | None]:
    """The pass rates of the delivery in `root`: root/pass_rates.json (and None), or, where only an older
    root/calibration.json is there, that file and a deprecation notice to print."""
    path, old = root / PASS_RATES_FILE, root / OLD_PASS_RATES_FILE
    if path.is_file() or not old.is_file():
        return path, None
    return old, (f"warning: reading {old}: {OLD_PASS_RATES_FILE} is the deprecated name of {PASS_RATES_FILE} "
                 f"(`rubric pass-rates` writes it); rename the file")


def read_inputs(root: Path, pass_rates_path: Path | None, split_path: Path | None) -> tuple[ReportInputs, list[Problem]]:
    """pass_rates_path / split_path: None or a missing file leaves that part out; DIR/validation.json and each
    task's removal.yaml are read when present."""
    delivery, specs, problems = load_catalog(root)
    pass_rates = None
    if pass_rates_path is not None and pass_rates_path.is_file():
        pass_rates = PassRates.model_validate_json(pass_rates_path.read_text(encoding="utf-8"))
    plan = read_plan(split_path) if split_path is not None and split_path.is_file() else None
    check_errors = {}
    for ref in delivery.all_tasks():
        # Paths relative to the delivery, so that the report does not depend on where it was built.
        found = check_task_folder(root / ref.path, ref.path, ref.id)
        check_errors[ref.id] = [p for p in found if p.severity == ERROR]
    validation = None
    if (root / VALIDATION_FILE).is_file():
        validation = ValidationReport.model_validate_json((root / VALIDATION_FILE).read_text(encoding="utf-8"))
    manual = {}
    for ref in delivery.all_tasks():
        reasons, found = read_removal(root / ref.path, f"{ref.path}/{REMOVAL_FILE}")
        manual[ref.id] = reasons
        problems += found
    return ReportInputs(delivery, specs, pass_rates, plan, check_errors, validation, manual), problems


def write_report(root: Path, out_dir: Path, pass_rates_path: Path | None,
                 split_path: Path | None) -> tuple[DeliveryReport, list[Problem]]:
    """Returns the report and the problems (task.yaml, removal.yaml) that kept something out of it."""
    inputs, problems = read_inputs(root, pass_rates_path, split_path)
    report = build_report(inputs)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / REPORT_FILE).write_text(render_markdown(report), encoding="utf-8")
    (out_dir / REPORT_JSON).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if report.chart:
        rates: dict[str, list[ChartTask]] = {}
        for row in report.tasks:
            if row.attempts:
                rates.setdefault(row.category, []).append(
                    ChartTask(row.successes or 0, row.attempts, row.decision, bool(row.flags)))
        (out_dir / CHART_FILE).write_text(pass_rate_svg(rates), encoding="utf-8")
    return report, problems
