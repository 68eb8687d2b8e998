import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
from delivery_factory import make_task, write_results

from rubrics.delivery.pass_rates.label_tasks import label_tasks
from rubrics.delivery.tasks.catalog import load_catalog
from rubrics.delivery.report.chart_svg import BINS, ChartTask, bin_index, pass_rate_svg
from rubrics.delivery.runs.graded_results import read_results
from rubrics.delivery.report.files import pass_rates_file, write_report
from rubrics.delivery.split.heldout import plan_split, write_plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "delivery"
SCHEMA = json.loads((ROOT / "schemas" / "delivery_report.schema.json").read_text())
OUTPUTS = ("report.md", "report.json", "pass-rates.svg")


def _small_delivery(tmp_path):
    root = tmp_path / "d"
    make_task(root / "tasks" / "easy-1", instruction="Add a missing comma in the greeting.", metadata={"category": "text"})
    make_task(root / "tasks" / "hard-1", instruction="Fix the deadlock in the job scheduler.", metadata={"category": "concurrency"})
    make_task(root / "tasks" / "mid-1", instruction="Handle empty input in the CSV reader.", metadata={"category": "text"})
    write_results(root / "results.jsonl", {"easy-1": [1.0] * 4, "hard-1": [0.0] * 4, "mid-1": [1.0, 0.0, 0.0, 1.0]})
    _, specs, _ = load_catalog(root)
    report = label_tasks(read_results(root / "results.jsonl"), {t: s.metadata.category for t, s in specs.items()},
                       attempts_requested=4)
    (root / "pass_rates.json").write_text(report.model_dump_json(indent=2))
    write_plan(plan_split(specs, 0.34, seed=1), root / "split.json")
    return root


def test_report_sections_and_numbers(tmp_path):
    root = _small_delivery(tmp_path)
    report, problems = write_report(root, root, root / "pass_rates.json", root / "split.json")
    assert problems == []
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads((root / "report.json").read_text()))
    md = (root / "report.md").read_text()
    for heading in ("## Category mix", "## Baseline pass@1 per category", "## Keep / drop / inspect",
                    "## Removed tasks", "## Tasks to inspect", "## Held-out split"):
        assert heading in md
    assert "![Pass rate per task, by category](pass-rates.svg)" in md
    assert "**easy-1**: already solved: 4/4 attempts pass" in md
    assert "**hard-1**: never solved: 0/4 attempts pass" in md
    baseline = {b.category: b for b in report.baseline}
    assert baseline["text"].pass_at_1 == 0.75 and baseline["text"].pass_at_1_shipped == 0.5
    assert baseline["all"].calibrated == 3 and baseline["all"].pass_at_1 == 0.5
    assert [m.tasks for m in report.category_mix] == [1, 2]
    assert report.split.heldout_shipped + report.split.training_shipped + len(report.removed) == 3


def test_report_without_pass_rates_or_split_still_describes_the_mix(tmp_path):
    root = _small_delivery(tmp_path)
    report, _ = write_report(root, tmp_path / "out", None, None)
    assert report.calibration is None and report.split is None and report.chart is None
    assert not (tmp_path / "out" / "pass-rates.svg").exists()
    assert "run `rubric pass-rates` first" in (tmp_path / "out" / "report.md").read_text()


def test_broken_folder_is_reported_as_removed(tmp_path):
    root = _small_delivery(tmp_path)
    (root / "tasks" / "mid-1" / "Dockerfile").unlink()
    report, _ = write_report(root, root, root / "pass_rates.json", root / "split.json")
    removed = {r.task_id: r.reasons for r in report.removed}
    assert removed["mid-1"] == ["fails tasks check: tasks/mid-1/Dockerfile: missing [missing-file]"]


def test_report_regenerates_identically(tmp_path):
    root = _small_delivery(tmp_path)
    write_report(root, tmp_path / "one", root / "pass_rates.json", root / "split.json")
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(root, moved)
    write_report(moved, tmp_path / "two", moved / "pass_rates.json", moved / "split.json")
    for name in OUTPUTS:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name


def test_committed_example_report_matches_a_fresh_one(tmp_path):
    write_report(EXAMPLE, tmp_path, EXAMPLE / "pass_rates.json", EXAMPLE / "split.json")
    for name in OUTPUTS:
        assert (tmp_path / name).read_text() == (EXAMPLE / name).read_text(), name


def test_bins_use_integer_arithmetic():
    assert [bin_index(c, 5) for c in range(6)] == [0, 1, 2, 3, 4, 6]
    assert bin_index(3, 5) == 3                       # 60% is in 41-60%, however 0.6 * 5 rounds
    assert bin_index(15, 16) == 5 and bin_index(1, 16) == 1
    assert BINS[bin_index(16, 16)] == "100%"


def test_svg_is_well_formed_and_counts_tasks():
    svg = pass_rate_svg({"b & c": [ChartTask(0, 4, "inspect", False), ChartTask(4, 4, "removed", True),
                                   ChartTask(4, 4, "keep", False)], "a": [ChartTask(2, 4, "keep", False)]})
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    # a removed task is drawn as removed, not by its bin; the flagged one is marked above its bar
    assert titles == ["a: 1 keep task(s) at 41-60%", "b & c: 1 inspect task(s) at 0%",
                      "b & c: 1 keep task(s) at 100%", "b & c: 1 removed task(s) at 100%"]
    assert ">2 !1</text>" in svg
    one = {"a": [ChartTask(2, 4, "keep", False)]}
    assert pass_rate_svg(one) == pass_rate_svg(one)


def test_the_pass_rates_file_is_the_new_name_else_an_older_calibration_json_with_a_notice(tmp_path):
    assert pass_rates_file(tmp_path) == (tmp_path / "pass_rates.json", None)   # neither: the new name, no notice
    (tmp_path / "calibration.json").write_text("{}")
    path, notice = pass_rates_file(tmp_path)
    assert path == tmp_path / "calibration.json" and "deprecated name of pass_rates.json" in notice
    (tmp_path / "pass_rates.json").write_text("{}")
    assert pass_rates_file(tmp_path) == (tmp_path / "pass_rates.json", None)
