"""`rubric import healthbench` on rows of HealthBench's published shape, and `--aggregate healthbench` checked
against a direct transcription of simple-evals' healthbench_eval.py formulas."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from rubric_fakes import REPO, ScriptedJudge

import rubrics
from rubrics.grading.dataset import read_dataset
from rubrics.healthbench.aggregate import aggregate_results
from rubrics.healthbench.convert import import_healthbench, write_examples
from rubrics.judges import Verdict
from rubrics.grading.scoring import grade_jobs

FIXTURE = REPO / "examples" / "healthbench" / "examples.jsonl"
COMPLETIONS = REPO / "examples" / "healthbench" / "completions.jsonl"


def rubric_cli(*args):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=120)


def test_import_writes_a_rubric_and_trajectory_per_row_and_reports_bad_rows(tmp_path):
    rows = FIXTURE.read_text().splitlines()
    bad = json.loads(rows[0])
    bad["rubrics"][0]["points"] = 2.5
    no_tag = json.loads(rows[1])
    no_tag["rubrics"][1]["tags"] = ["has space"]
    source = tmp_path / "rows.jsonl"
    source.write_text("\n".join([rows[0], json.dumps(bad), "[1, 2", json.dumps(no_tag), rows[1], rows[0]]) + "\n")
    done = rubric_cli("import", "healthbench", source, tmp_path / "out", "--completion-column", "completion")
    assert done.returncode == 1
    errors = done.stderr.splitlines()
    assert [e.split(": error: ")[0] for e in errors] == [f"{source}:{n}" for n in (2, 3, 4)]
    assert "field rubrics[0].points: points 2.5 are not whole" in errors[0]
    assert "field rubrics[1].tags[0]: 'has space' is not a tag" in errors[2]
    dataset = [json.loads(line) for line in (tmp_path / "out" / "dataset.jsonl").read_text().splitlines()]
    assert len(dataset) == 3 and dataset[0]["trajectory"].startswith("trajectories/7e6f1b7a")
    assert dataset[2]["trajectory"].endswith("-2.json")   # the same prompt twice keeps both
    first = rubrics.load_rubric(tmp_path / "out" / dataset[0]["rubric"])
    assert [(c.points, c.tags, c.is_judge) for c in first.criteria][3] == (-8, ("level:example", "axis:accuracy"), True)
    trajectory = rubrics.load_trajectory(tmp_path / "out" / dataset[0]["trajectory"])
    assert trajectory.messages[-1].role == "assistant" and trajectory.final_answer.startswith("Yes: this is an")
    assert trajectory.metadata["example_tags"] == ["theme:emergency_referrals", "physician_agreed_category:emergent"]


def test_completions_from_a_second_file_or_a_nested_column():
    from_file = import_healthbench(FIXTURE, COMPLETIONS)
    assert from_file.errors == [] and len(from_file.examples) == 3
    nested = import_healthbench(FIXTURE, column="ideal_completions_data.ideal_completion")
    assert [e.trajectory["final_answer"] for e in nested.examples] == ["That is usually fine for a regular runner."]
    assert len(nested.errors) == 2 and "field ideal_completions_data.ideal_completion: missing" in nested.errors[0]


# some criteria met, some not, and two penalties that occur: every figure below is a different number
KEYWORDS = {"emergency care": "emergency", "internal burns": "oesophagus burn", "honey": "honey",
            "inducing vomiting": "induce", "concise": "Yes:", "around 50": "fitness", "warning symptoms": "fainting",
            "emergency department now": "see a doctor", "kidneys": "kidneys", "pharmacist": "doctor",
            "dose of ibuprofen": "kidneys"}


def keyword_judge():
    """Met when the completion holds the criterion's keyword: deterministic, and different per criterion."""
    def decide(request):
        keyword = next(v for k, v in KEYWORDS.items() if k in request.item.criterion)
        met = keyword in request.context.evidence[0].text.split("[assistant]")[-1]
        return Verdict(met=met, probability=0.9 if met else 0.1)
    return ScriptedJudge(decide)


def simple_evals_figures(examples):
    """healthbench_eval.py's grade_sample metrics + _compute_clipped_stats' mean, transcribed directly."""
    def calculate_score(items, met):
        total = sum(i["points"] for i in items if i["points"] > 0)
        if total == 0:
            return None
        return sum(i["points"] for i, m in zip(items, met) if m) / total

    name2values = {}
    for row, met in examples:
        metrics = {"overall_score": calculate_score(row["rubrics"], met)}
        metrics.update({tag: metrics["overall_score"] for tag in row["example_tags"]})
        by_tag = {}
        for item, m in zip(row["rubrics"], met):
            for tag in item["tags"]:
                by_tag.setdefault(tag, []).append((item, m))
        for tag, pairs in by_tag.items():
            score = calculate_score([p[0] for p in pairs], [p[1] for p in pairs])
            if score is not None:
                metrics[tag] = score
        for name, value in metrics.items():
            name2values.setdefault(name, []).append(value)
    return {name: (float(np.clip(np.mean(v), 0, 1)), len(v)) for name, v in name2values.items()}


def test_aggregate_matches_simple_evals_formulas(tmp_path):
    report = import_healthbench(FIXTURE, COMPLETIONS)
    dataset = read_dataset(write_examples(report.examples, tmp_path))
    judge = keyword_judge()
    results = grade_jobs(dataset.jobs, lambda plan: judge)
    assert len(judge.calls) == 1 and all(r.complete for r in results)
    aggregate = aggregate_results(results, [job.trajectory for job in dataset.jobs])

    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    met = [[i.status == "met" for i in r.items] for r in results]
    expected = simple_evals_figures(list(zip(rows, met)))
    assert [e.score for e in aggregate.examples] == [r.earned / r.total for r in results]
    assert (aggregate.overall.mean, aggregate.overall.n_samples) == pytest.approx(expected.pop("overall_score"))
    assert sorted(aggregate.tags) == sorted(expected)
    for tag, figure in aggregate.tags.items():
        assert (figure.mean, figure.n_samples) == pytest.approx(expected[tag]), tag
    assert sorted(round(e.score, 4) for e in aggregate.examples) == [round(1 / 12, 4), round(5 / 12, 4), round(17 / 23, 4)]
    assert 0 < aggregate.tags["axis:completeness"].mean < aggregate.tags["axis:accuracy"].mean < 1


def test_bootstrap_std_is_seeded_and_agrees_with_numpy_resampling():
    from rubrics.healthbench.aggregate import figure
    import random

    values = [0.1, 0.9, 0.5, 0.7, -0.2, 1.0, 0.3, 0.6, 0.8, 0.4] * 3
    ours = figure(values, random.Random(0))
    assert ours == figure(values, random.Random(0))   # deterministic
    rng = np.random.default_rng(0)
    theirs = np.std([np.clip(np.mean(rng.choice(values, len(values))), 0, 1) for _ in range(1000)])
    assert ours.bootstrap_std == pytest.approx(theirs, rel=0.15) and ours.n_samples == 30


def test_grade_aggregate_healthbench_in_the_cli(tmp_path):
    rubric = {"version": 1, "id": "hb", "task": "t", "criteria": [
        {"id": "a", "points": 4, "contains": {"text": "alpha"}, "tags": ["axis:accuracy"]},
        {"id": "b", "points": 2, "contains": {"text": "beta"}, "tags": ["axis:completeness"]},
        {"id": "p", "points": -5, "contains": {"text": "bad"}, "tags": ["axis:accuracy"]}]}
    answers = ["alpha beta", "alpha", "bad", "beta bad"]
    lines = [json.dumps({"trajectory": {"id": f"e{i}", "messages": [], "final_answer": text,
                                        "metadata": {"example_tags": ["theme:x"] if i % 2 else []}},
                         "rubric": rubric}) for i, text in enumerate(answers)]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    done = rubric_cli("grade", "--dataset", path, "--aggregate", "healthbench", "--format", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    scores = [e["score"] for e in out["aggregate"]["examples"]]
    assert scores == [1.0, 4 / 6, -5 / 6, -3 / 6]
    assert out["aggregate"]["overall"]["mean"] == pytest.approx(1 / 12) and out["aggregate"]["overall"]["n_samples"] == 4
    assert out["aggregate"]["tags"]["theme:x"]["mean"] == pytest.approx((4 / 6 - 3 / 6) / 2)
    assert out["aggregate"]["tags"]["axis:accuracy"]["mean"] == 0.0   # (1 + 1 - 1.25 - 1.25) / 4, clipped at 0
    table = rubric_cli("grade", "--dataset", path, "--aggregate", "healthbench")
    assert any(line.split()[:2] == ["overall", "0.0833"] for line in table.stdout.splitlines())
