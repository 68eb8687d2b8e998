"""`rubric report`: read a delivery's inputs, write report.md, report.json and the SVG chart beside it."""
from __future__ import annotations

from pathlib import Path

from rubrics.delivery.calibration_model import CalibrationReport
from rubrics.delivery.catalog import load_catalog
from rubrics.delivery.chart_svg import pass_rate_svg
from rubrics.delivery.folder_check import check_task_folder
from rubrics.delivery.layout import REPORT_FILE
from rubrics.delivery.problems import Problem
from rubrics.delivery.report_build import CHART_FILE, ReportInputs, build_report
from rubrics.delivery.report_markdown import render_markdown
from rubrics.delivery.report_model import DeliveryReport
from rubrics.delivery.split import read_plan

REPORT_JSON = "report.json"
CALIBRATION_FILE = "calibration.json"


def write_report(root: Path, out_dir: Path, calibration_path: Path | None,
                 split_path: Path | None) -> tuple[DeliveryReport, list[Problem]]:
    """Returns the report and the task.yaml problems that kept tasks out of it (empty when all loaded).

    calibration_path / split_path: None or a missing file leaves that part of the report out.
    """
    delivery, specs, problems = load_catalog(root)
    calibration = None
    if calibration_path is not None and calibration_path.is_file():
        calibration = CalibrationReport.model_validate_json(calibration_path.read_text(encoding="utf-8"))
    plan = read_plan(split_path) if split_path is not None and split_path.is_file() else None
    check_errors = {}
    for ref in delivery.all_tasks():
        # Paths relative to the delivery, so that the report does not depend on where it was built.
        found = check_task_folder(root / ref.path, ref.path, ref.id)
        check_errors[ref.id] = [p for p in found if p.severity == "error"]
    report = build_report(ReportInputs(delivery, specs, calibration, plan, check_errors))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / REPORT_FILE).write_text(render_markdown(report), encoding="utf-8")
    (out_dir / REPORT_JSON).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if report.chart:
        rates: dict[str, list[tuple[int, int]]] = {}
        for row in report.tasks:
            if row.attempts:
                rates.setdefault(row.category, []).append((row.successes or 0, row.attempts))
        (out_dir / CHART_FILE).write_text(pass_rate_svg(rates), encoding="utf-8")
    return report, problems
