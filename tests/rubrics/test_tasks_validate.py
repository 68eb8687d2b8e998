"""`rubric tasks validate`: the shipped example validates; a task whose fix is wrong, or whose start already
passes, is reported with the failing test names."""
import json
import shutil

from sandbox_support import EXAMPLE, TIMEOUT, needs_bwrap, rubric

pytestmark = needs_bwrap


def test_the_example_delivery_validates(tmp_path):
    out = tmp_path / "validation.json"
    done = rubric("tasks", "validate", EXAMPLE, "--jobs", "2", "--timeout", TIMEOUT, "--output", out)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())
    assert (report["valid"], report["invalid"], report["skipped"]) == (14, 0, 1)
    assert out.read_text() == (EXAMPLE / "validation.json").read_text()


def test_wrong_solution_and_solved_start_are_invalid(tmp_path):
    root = tmp_path / "delivery"
    for task in ("task-0421", "task-0503"):
        shutil.copytree(EXAMPLE / "tasks" / task, root / "tasks" / task)
    # 0421's reference fix changes nothing that matters; 0503 ships a start that is already fixed (so its
    # solution.patch no longer applies either).
    (root / "tasks" / "task-0421" / "solution.patch").write_text(
        (EXAMPLE / "tasks" / "task-0421" / "solution.patch").read_text().replace("category.lower()", "category"))
    fixed = root / "tasks" / "task-0503" / "repo" / "shopdb" / "migrations" / "add_index.py"
    fixed.write_text(fixed.read_text().replace("idx_order_created", "idx_orders_created"))
    done = rubric("tasks", "validate", root, "--timeout", TIMEOUT)
    assert done.returncode == 1
    verdicts = {t["task_id"]: t for t in json.loads((root / "validation.json").read_text())["tasks"]}
    assert verdicts["task-0421"]["verdict"] == "invalid"
    assert verdicts["task-0421"]["reasons"] == [
        "with solution.patch, not passing: tests/test_fail_to_pass.py::test_fail_to_pass_1: failed"]
    assert verdicts["task-0503"]["verdict"] == "invalid"
    assert "untouched start already passes fail-to-pass: tests/test_fail_to_pass.py::test_fail_to_pass_1: passed" \
        in verdicts["task-0503"]["reasons"]
    assert "task-0421: invalid" in done.stdout and "test_fail_to_pass_1" in done.stdout
