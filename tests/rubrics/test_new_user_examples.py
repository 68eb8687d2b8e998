"""examples/new-user: every intended.json covers every judge item on every trajectory, and the code checks give
what expected.json says. No model is loaded: judge items are left unevaluated, or answered by a scripted judge
that gives the intended verdicts (to check benchmarks/new_user_rubrics.py's arithmetic)."""
import importlib.util
import json

import pytest
from rubric_fakes import REPO, ScriptedJudge

import rubrics
from rubrics.judges import NoJudge, Verdict
from rubrics.rubric.lint import lint_file

NEW_USER = REPO / "examples" / "new-user"
FOLDERS = sorted(p.name for p in NEW_USER.iterdir() if (p / "rubric.yaml").exists())


def load(folder: str, name: str) -> dict:
    return json.loads((NEW_USER / folder / name).read_text())


def trajectory_files(folder: str) -> list[str]:
    return sorted(p.name for p in (NEW_USER / folder / "trajectories").glob("*.json"))


def graded(folder: str, judge):
    paths = [NEW_USER / folder / "trajectories" / name for name in trajectory_files(folder)]
    return dict(zip(trajectory_files(folder), rubrics.score_many(paths, NEW_USER / folder / "rubric.yaml", judge=judge)))


def benchmark():
    spec = importlib.util.spec_from_file_location("new_user_rubrics", REPO / "benchmarks" / "new_user_rubrics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_two_domains_are_there():
    assert FOLDERS == ["hr-rejection", "sql-answers"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_rubric_lints_clean(folder):
    assert lint_file(NEW_USER / folder / "rubric.yaml") == []


@pytest.mark.parametrize("folder", FOLDERS)
def test_intended_covers_every_judge_item_on_every_trajectory(folder):
    intended = load(folder, "intended.json")
    files = trajectory_files(folder)
    assert len(files) == 7 and sorted(intended["verdicts"]) == files and intended["ideal"] in files
    assert intended["about"]
    for name, result in graded(folder, NoJudge()).items():
        assert result.items, (name, result.errors)   # it loaded
        judge_ids = {i.id for i in result.items if i.method == "judge"}
        assert set(intended["verdicts"][name]) == judge_ids, name
        assert all(isinstance(v, bool) for v in intended["verdicts"][name].values())
        assert result.trajectory_id == name.removesuffix(".json")   # the scripted judge below maps ids to files


@pytest.mark.parametrize("folder", FOLDERS)
def test_code_checks_and_gates_give_the_expected_statuses(folder):
    expected = load(folder, "expected.json")["trajectories"]
    intended = load(folder, "intended.json")["verdicts"]
    assert sorted(expected) == trajectory_files(folder)
    for name, result in graded(folder, NoJudge()).items():
        assert {i.id: i.status for i in result.items if i.method == "code"} == expected[name]["items"], name
        assert result.gates_passed is expected[name]["gates_passed"], name
        for item in (i for i in result.items if i.method == "judge"):
            # Without a judge an item is "not evaluated", unless it has no evidence at all: then it is unmet, and
            # a person reading that (empty) evidence must have intended it unmet (or the penalty not to apply).
            assert item.status == "error" or (item.status == "unmet" and not intended[name][item.id]), (name, item.id)


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_judge_giving_the_intended_verdicts_puts_the_ideal_strictly_on_top(folder):
    intended = load(folder, "intended.json")["verdicts"]
    judge = ScriptedJudge(lambda r: Verdict(met=intended[r.context.trajectory_id + ".json"][r.item.id],
                                            probability=0.9))
    summary = benchmark().grade_folder(NEW_USER / folder, judge)
    assert summary["agreed"] == summary["asked"] > 0 and summary["errors"] == 0
    assert summary["ideal_on_top"] and summary["not_below"] == []
    rows = {r["name"]: r for r in summary["rows"]}
    ideal = rows[summary["ideal"]]
    assert ideal["score"] == ideal["intended_score"] == 1.0 and not ideal["flawed"]
    assert all(r["flawed"] and r["score"] == r["intended_score"] < 1.0 for n, r in rows.items() if n != ideal["name"])
    assert "ideal strictly above every flawed trajectory: yes" in benchmark().report(summary)


def test_a_judge_that_says_met_to_everything_is_caught():
    judge = ScriptedJudge(lambda r: Verdict(met=True, probability=0.9))
    summary = benchmark().grade_folder(NEW_USER / "sql-answers", judge)
    assert summary["agreed"] < summary["asked"] and not summary["ideal_on_top"]
