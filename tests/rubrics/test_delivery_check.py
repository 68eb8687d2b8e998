import os
from pathlib import Path

import pytest
from delivery_factory import make_task

from rubrics.delivery.tasks.folder_check import check_delivery
from rubrics.delivery.tasks.layout import discover

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "delivery"


def errors(root):
    _, problems = check_delivery(root)
    return [p for p in problems if p.severity == "error"]


def codes(root):
    return sorted(p.code for p in errors(root))


@pytest.fixture
def delivery(tmp_path):
    make_task(tmp_path / "tasks" / "task-1")
    return tmp_path


def test_a_valid_folder_passes(delivery):
    assert check_delivery(delivery)[1] == []


def test_the_example_delivery_passes():
    delivery, problems = check_delivery(EXAMPLE)
    assert problems == []
    assert len(delivery.tasks) >= 12


@pytest.mark.parametrize("name", ["task.yaml", "Dockerfile", "tools.json", "solution.patch", "grade.sh"])
def test_each_missing_file_is_an_error_naming_it(delivery, name):
    (delivery / "tasks" / "task-1" / name).unlink()
    found = errors(delivery)
    assert [p.code for p in found] == ["missing-file"]
    assert found[0].path.endswith(f"tasks/task-1/{name}")
    assert found[0].format_at_path().startswith(str(delivery / "tasks" / "task-1" / name) + ": missing")


def test_missing_tests_folder(delivery):
    for f in (delivery / "tasks" / "task-1" / "tests").iterdir():
        f.unlink()
    (delivery / "tasks" / "task-1" / "tests").rmdir()
    assert codes(delivery) == ["missing-file"]


def test_task_yaml_schema_errors_name_line_column_and_field(delivery):
    (delivery / "tasks" / "task-1" / "task.yaml").write_text(
        "instruction: Fix it.\nrepo: pkg\ncommit: a91c3e2\ntools: [bash]\nmax_steps: 0\n"
        "metadata:\n  category: bugs\n  difficulty: extreme\nshown_to_model: yes\n")
    found = {p.format_at_path().split(str(delivery) + "/", 1)[1] for p in errors(delivery)}
    assert any(f.startswith("tasks/task-1/task.yaml:5:1: max_steps:") for f in found)
    assert any(f.startswith("tasks/task-1/task.yaml:8:3: metadata.difficulty:") for f in found)
    assert any(f.startswith("tasks/task-1/task.yaml:9:1: shown_to_model:") for f in found)


def test_task_yaml_syntax_error(delivery):
    (delivery / "tasks" / "task-1" / "task.yaml").write_text("instruction: [unclosed\n")
    assert codes(delivery) == ["task-yaml"]


def test_id_must_match_folder(delivery):
    make_task(delivery / "tasks" / "task-1", id="task-2")
    assert codes(delivery) == ["id-mismatch"]


def test_grade_sh_must_be_executable(delivery):
    (delivery / "tasks" / "task-1" / "grade.sh").chmod(0o644)
    if os.access(delivery / "tasks" / "task-1" / "grade.sh", os.X_OK):
        pytest.skip("running as a user for whom every file is executable")
    assert codes(delivery) == ["grade-not-executable"]


def test_tests_must_be_split(delivery):
    tests = delivery / "tasks" / "task-1" / "tests"
    (tests / "test_extra.py").write_text("def test_x():\n    assert 1 + 1 == 2\n")
    found = errors(delivery)
    assert [p.code for p in found] == ["tests-unsplit"]
    assert found[0].path.endswith("tests/test_extra.py")


def test_fixtures_and_conftest_may_stay_unclassified(delivery):
    tests = delivery / "tasks" / "task-1" / "tests"
    (tests / "conftest.py").write_text("import pytest\n")
    (tests / "data.csv").write_text("a,b\n")
    assert errors(delivery) == []


def test_split_by_folder_is_accepted(delivery):
    tests = delivery / "tasks" / "task-1" / "tests"
    for kind in ("fail_to_pass", "pass_to_pass"):
        (tests / kind).mkdir()
        (tests / f"test_{kind}.py").rename(tests / kind / "test_api.py")
    assert errors(delivery) == []


@pytest.mark.parametrize("kind,code", [("fail_to_pass", "no-fail-to-pass"), ("pass_to_pass", "no-pass-to-pass")])
def test_each_kind_of_test_is_required(delivery, kind, code):
    (delivery / "tasks" / "task-1" / "tests" / f"test_{kind}.py").unlink()
    assert codes(delivery) == [code]


def test_a_test_file_without_tests_is_an_error(delivery):
    (delivery / "tasks" / "task-1" / "tests" / "test_fail_to_pass.py").write_text("# nothing yet\n")
    assert codes(delivery) == ["tests-empty"]


def test_solution_must_be_a_diff(delivery):
    (delivery / "tasks" / "task-1" / "solution.patch").write_text("just change the return value\n")
    assert codes(delivery) == ["solution-not-diff"]


def test_solution_editing_tests_is_a_warning(delivery):
    (delivery / "tasks" / "task-1" / "solution.patch").write_text(
        "--- a/tests/test_fail_to_pass.py\n+++ b/tests/test_fail_to_pass.py\n@@ -1 +1 @@\n-x\n+y\n")
    _, problems = check_delivery(delivery)
    assert [(p.code, p.severity) for p in problems] == [("solution-edits-tests", "warning")]


def test_dockerfile_needs_from(delivery):
    (delivery / "tasks" / "task-1" / "Dockerfile").write_text("RUN echo hi\n")
    assert codes(delivery) == ["dockerfile-no-from"]


def test_tools_json_invalid_or_missing_a_tool(delivery):
    tools = delivery / "tasks" / "task-1" / "tools.json"
    tools.write_text("[{\"name\": \"bash\"},")
    assert codes(delivery) == ["tools-invalid"]
    tools.write_text("[\"bash\"]")
    found = errors(delivery)
    assert [p.code for p in found] == ["tools-undeclared"] and "edit_file" in found[0].message


def test_unreviewed_task_is_a_warning_only(delivery):
    make_task(delivery / "tasks" / "task-1", metadata={"reviewers": []})
    _, problems = check_delivery(delivery)
    assert [(p.code, p.severity) for p in problems] == [("unreviewed", "warning")]


def test_duplicate_ids_across_sides(delivery):
    make_task(delivery / "heldout" / "task-1")
    assert codes(delivery) == ["duplicate-id"]


def test_empty_folder_has_no_tasks(tmp_path):
    assert codes(tmp_path) == ["no-tasks"]


RUBRIC = """version: 1
id: mis
task: Prepare the MIS.
gates:
  - {id: sent, email_sent: {to: cfo@acme.test}}
criteria:
  - {id: clear, points: 1, judge: the MIS is clear}
"""


def make_rubric_task(folder: Path, rubric_text: str) -> None:
    make_task(folder, rubric="rubric.yaml")
    (folder / "rubric.yaml").write_text(rubric_text)
    for name in ("solution.patch",):
        (folder / name).unlink()
    for f in (folder / "tests").iterdir():
        f.unlink()
    (folder / "tests").rmdir()


def test_rubric_task_needs_no_tests_but_a_clean_rubric(tmp_path):
    make_rubric_task(tmp_path / "tasks" / "mis", RUBRIC)
    assert errors(tmp_path) == []
    (tmp_path / "tasks" / "mis" / "rubric.yaml").write_text(RUBRIC.replace("points: 1", "points: 0"))
    found = errors(tmp_path)
    assert found and all(p.code.startswith("rubric-") for p in found)
    assert found[0].line == 7 and found[0].path.endswith("tasks/mis/rubric.yaml")


def test_rubric_task_missing_or_escaping_rubric(tmp_path):
    make_rubric_task(tmp_path / "tasks" / "mis", RUBRIC)
    (tmp_path / "tasks" / "mis" / "rubric.yaml").unlink()
    assert codes(tmp_path) == ["missing-file"]
    make_task(tmp_path / "tasks" / "mis", rubric="../outside.yaml")
    assert codes(tmp_path) == ["rubric-outside"]


def test_layouts(tmp_path):
    make_task(tmp_path / "a")
    make_task(tmp_path / "b")
    assert [r.id for r in discover(tmp_path).tasks] == ["a", "b"]        # a bare folder of tasks
    assert [r.path for r in discover(tmp_path / "a").tasks] == ["."]     # one task
    make_task(tmp_path / "d" / "tasks" / "x")
    make_task(tmp_path / "d" / "heldout" / "y")
    d = discover(tmp_path / "d")
    assert [(r.id, r.side) for r in d.all_tasks()] == [("x", "tasks"), ("y", "heldout")]
