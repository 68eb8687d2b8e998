import json
from fractions import Fraction
from math import comb
from pathlib import Path

import jsonschema
import pytest
from delivery_factory import result_line, write_results
from hypothesis import given
from hypothesis import strategies as st

from rubrics.delivery.pass_rates.estimators import pass_at_k, pass_hat_k
from rubrics.delivery.pass_rates.label_tasks import label_for, label_tasks
from rubrics.delivery.runs.graded_results import read_results

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "pass_rates.schema.json").read_text())


def closed_form_pass_at_k(n, c, k):
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def closed_form_pass_hat_k(n, c, k):
    return Fraction(comb(c, k), comb(n, k))


def test_estimators_match_binomial_expressions_for_every_small_case():
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert abs(pass_at_k(n, c, k) - float(closed_form_pass_at_k(n, c, k))) < 1e-9, (n, c, k)
                assert abs(pass_hat_k(n, c, k) - float(closed_form_pass_hat_k(n, c, k))) < 1e-9, (n, c, k)


@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_estimators_stay_exact_where_binomials_overflow_floats(ncK):
    n, c, k = ncK
    assert abs(pass_at_k(n, c, k) - float(closed_form_pass_at_k(n, c, k))) < 1e-9
    assert abs(pass_hat_k(n, c, k) - float(closed_form_pass_hat_k(n, c, k))) < 1e-9


def test_known_values():
    assert pass_at_k(16, 5, 1) == pytest.approx(5 / 16, abs=1e-12)        # pass@1 is the pass rate
    assert pass_at_k(16, 0, 8) == 0.0
    assert pass_at_k(16, 16, 8) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0                                     # any 10 of 10 contain the success
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5, abs=1e-12)             # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7, abs=1e-12)             # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6, abs=1e-12)          # C(2,2)/C(4,2)
    assert pass_hat_k(16, 12, 1) == pytest.approx(0.75, abs=1e-12)
    assert pass_hat_k(16, 15, 16) == 0.0
    assert pass_at_k(200, 10, 100) == pytest.approx(float(closed_form_pass_at_k(200, 10, 100)), abs=1e-12)


@pytest.mark.parametrize("args", [(0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 2, 0), (4, 2, 5)])
def test_estimators_reject_impossible_counts(args):
    with pytest.raises(ValueError):
        pass_at_k(*args)
    with pytest.raises(ValueError):
        pass_hat_k(*args)


def test_estimators_reject_non_integers():
    with pytest.raises(TypeError):
        pass_at_k(4.0, 2, 1)
    with pytest.raises(TypeError):
        pass_hat_k(4, True, 1)


def test_labels_follow_pass_rate():
    assert label_for(0.0) == "inspect"
    assert label_for(None) == "inspect"
    assert label_for(1.0) == "drop"
    for rate in (1 / 16, 0.5, 15 / 16):
        assert label_for(rate) == "keep"


def _label_tasks(tmp_path, per_task, lines=(), **kwargs):
    path = write_results(tmp_path / "results.jsonl", per_task)
    if lines:
        with path.open("a") as handle:
            handle.write("\n".join(lines) + "\n")
    categories = {t: "bugs" for t in per_task}
    categories.update(kwargs.pop("extra_tasks", {}))
    report = label_tasks(read_results(path), categories, **kwargs)
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(report.model_dump_json()))
    return {t.task_id: t for t in report.tasks}, report


def test_labels_on_constructed_pass_rates(tmp_path):
    tasks, report = _label_tasks(tmp_path, {"never": [0.0] * 16, "always": [1.0] * 16, "half": [1.0, 0.0] * 8},
                               attempts_requested=16)
    assert (tasks["never"].label, tasks["always"].label, tasks["half"].label) == ("inspect", "drop", "keep")
    half = tasks["half"]
    assert (half.attempts, half.successes, half.pass_rate, half.pass_at_1) == (16, 8, 0.5, 0.5)
    assert half.score_mean == 0.5 and half.score_std == 0.5
    assert half.pass_at_k == round(pass_at_k(16, 8, 8), 6) and half.pass_hat_k == round(pass_hat_k(16, 8, 8), 6)
    assert (report.summary.keep, report.summary.drop, report.summary.inspect) == (1, 1, 1)
    assert not any(t.flags for t in tasks.values())


def test_pass_threshold_decides_success_for_partial_scores(tmp_path):
    tasks, _ = _label_tasks(tmp_path, {"t": [0.5, 0.75, 1.0, 0.25]}, attempts_requested=4, pass_threshold=0.75)
    assert tasks["t"].successes == 2
    tasks, _ = _label_tasks(tmp_path, {"t": [0.5, 0.75, 1.0, 0.25]}, attempts_requested=4)
    assert tasks["t"].successes == 1 and tasks["t"].score_mean == 0.625


def test_regrade_disagreement_flags_flaky_and_counts_the_attempt_once(tmp_path):
    tasks, _ = _label_tasks(tmp_path, {"t": [1.0, 0.0, 1.0, 0.0]}, [result_line("t", "t/attempt-01", 0.0)],
                          attempts_requested=4)
    t = tasks["t"]
    assert t.flaky and [f.code for f in t.flags] == ["flaky-regrade"]
    assert "t/attempt-01" in t.flags[0].message
    assert t.attempts == 4 and t.successes == 2


def test_identical_regrade_is_not_flaky(tmp_path):
    tasks, _ = _label_tasks(tmp_path, {"t": [1.0, 0.0]}, [result_line("t", "t/attempt-01", 1.0)], attempts_requested=2)
    assert not tasks["t"].flaky and tasks["t"].attempts == 2


@pytest.mark.parametrize("reference_id", ["t/reference", "t:reference", "reference", "t-REFERENCE"])
def test_failing_reference_flags_flaky_and_is_not_an_attempt(tmp_path, reference_id):
    tasks, _ = _label_tasks(tmp_path, {"t": [1.0, 0.0]}, [result_line("t", reference_id, 0.0)], attempts_requested=2)
    t = tasks["t"]
    assert t.reference == "failed" and t.flaky and t.attempts == 2
    assert [f.code for f in t.flags] == ["reference-fails"]


def test_passing_reference_and_lookalike_ids(tmp_path):
    lines = [result_line("t", "t/reference", 1.0), result_line("t", "t/nonreference", 0.0)]
    tasks, _ = _label_tasks(tmp_path, {"t": [1.0]}, lines, attempts_requested=2)
    # "nonreference" does not end in a separator + "reference": it is an ordinary attempt
    assert tasks["t"].reference == "passed" and tasks["t"].attempts == 2 and not tasks["t"].flaky


def test_too_few_attempts_incomplete_and_missing_tasks(tmp_path):
    lines = [result_line("t", "t/attempt-09", 0.0, complete=False)]
    tasks, report = _label_tasks(tmp_path, {"t": [1.0, 0.0, 1.0]}, lines, attempts_requested=16,
                               extra_tasks={"silent": "bugs"})
    assert [f.code for f in tasks["t"].flags] == ["incomplete-results", "too-few-attempts"]
    assert tasks["t"].attempts == 3 and tasks["t"].pass_at_k is None   # k = 8 > 3 attempts
    silent = tasks["silent"]
    assert silent.label == "inspect" and silent.pass_rate is None and silent.pass_at_1 is None
    assert {f.code for f in silent.flags} == {"no-results", "too-few-attempts"}
    assert report.summary.too_few_attempts == 2


def test_bad_lines_are_reported_and_skipped(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("\n".join([
        result_line("t", "t/attempt-01", 1.0),
        "{not json",
        json.dumps({"error": "could not load", "source": "x.jsonl:3"}),
        json.dumps({"trajectory_id": "t/attempt-02", "task_id": "t", "score": 1.7}),
        json.dumps({"trajectory_id": "u/attempt-01", "task_id": None, "score": 1.0}),
        result_line("other", "other/attempt-01", 1.0),
    ]) + "\n")
    results = read_results(path, "results.jsonl")
    assert [p.split(":")[1] for p in results.problems] == ["2", "3", "4", "5"]
    assert "score" in results.problems[2]
    report = label_tasks(results, {"t": "bugs"}, attempts_requested=1)
    assert report.tasks[0].attempts == 1 and report.unknown_tasks == ["other"]
    assert len(report.problems) == 4


def test_k_defaults_to_half_the_attempts_and_is_bounded(tmp_path):
    _, report = _label_tasks(tmp_path, {"t": [1.0] * 4}, attempts_requested=4)
    assert report.k == 2
    with pytest.raises(ValueError):
        _label_tasks(tmp_path, {"t": [1.0] * 4}, attempts_requested=4, k=5)
