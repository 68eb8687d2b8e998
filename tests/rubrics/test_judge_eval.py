"""judge-eval: labels loading, agreement metrics, threshold fitting, and the command over a scripted judge."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from judge_models import INVOICE_RUBRIC, LABELS_DIR
from rubric_fakes import ScriptedJudge
from rubrics import trust as je
from rubrics.judges.fitted.logistic import fit_logistic, logit, sigmoid
from rubrics.judges.protocol import Verdict

INVOICE_LABELS = LABELS_DIR / "invoice-fix" / "labels.jsonl"
CFO_LABELS = LABELS_DIR / "cfo-mis" / "labels.jsonl"


def judged(pairs, item="a"):
    return [je.Judged(je.Label(f"t{i}", None, item, y, f"x:{i}"), p, None) for i, (y, p) in enumerate(pairs)]


def test_agreement_metrics_by_hand():
    # truth:    T T T F F F ; predicted at 0.5: T T F T F F
    pairs = [(True, 0.9), (True, 0.6), (True, 0.4), (False, 0.7), (False, 0.2), (False, 0.1)]
    a = je.agreement(pairs)
    assert a.n == 6 and a.positives == 3 and a.errors == 0
    assert a.accuracy == pytest.approx(4 / 6)
    assert a.balanced_accuracy == pytest.approx((2 / 3 + 2 / 3) / 2)
    # observed 4/6, expected 0.5*0.5 + 0.5*0.5 = 0.5 -> kappa (0.6667 - 0.5) / 0.5
    assert a.kappa == pytest.approx((4 / 6 - 0.5) / 0.5)
    assert a.brier == pytest.approx((0.01 + 0.16 + 0.36 + 0.49 + 0.04 + 0.01) / 6)


def test_errors_are_counted_apart_and_constant_raters_have_no_kappa():
    a = je.agreement([(True, None), (True, 0.8), (True, 0.9)])
    assert a.errors == 1 and a.n == 2 and a.accuracy == 1.0 and a.kappa is None
    assert je.agreement([(True, None)]).accuracy is None


def test_fit_thresholds_maximises_balanced_accuracy_inside_zero_one():
    data = judged([(True, 0.40), (True, 0.35), (False, 0.30), (False, 0.20)])
    fitted = je.fit_thresholds(data)
    assert 0.30 < fitted["a"] <= 0.35
    report = je.evaluate(data, fitted)
    assert report.per_item["a"].accuracy == 1.0 and je.evaluate(data).per_item["a"].accuracy == 0.5
    assert all(0 < t < 1 for t in je.fit_thresholds(judged([(True, 0.0), (False, 1.0)])).values())


def test_cross_validated_thresholds_are_fitted_without_the_held_out_trajectory():
    # One item; the held-out label is always the one the others would mis-threshold.
    data = judged([(True, 0.9), (False, 0.1), (True, 0.8), (False, 0.2)])
    assert je.cross_validated(data).overall.accuracy == 1.0
    flipped = judged([(False, 0.9), (True, 0.1)])
    assert je.cross_validated(flipped).overall.accuracy == 0.0


def test_calibrate_fits_on_the_raw_scores():
    # judgments made with the identity calibration: logit(probability) is the method's raw score
    raw = [(True, sigmoid(1.0)), (True, sigmoid(0.6)), (False, sigmoid(-0.2)), (False, sigmoid(0.1)),
           (True, sigmoid(0.2)), (False, sigmoid(0.5))]
    recalibrated, fit = je.calibrate(judged(raw))
    scale, offset = fit.scale, fit.offset
    assert scale > 0
    assert je.evaluate(recalibrated).overall.brier < je.evaluate(judged(raw)).overall.brier
    assert (scale, offset) == pytest.approx(fit_logistic([1.0, 0.6, -0.2, 0.1, 0.2, 0.5], [y for y, _ in raw]))
    assert [j.probability for j in recalibrated] == \
        pytest.approx([sigmoid(scale * x + offset) for x in (1.0, 0.6, -0.2, 0.1, 0.2, 0.5)])
    # an error judgment stays an error, and is not fitted on
    with_error = judged(raw) + [je.Judged(je.Label("e", None, "a", True, "x:e"), None, "boom")]
    again, fit = je.calibrate(with_error)
    assert (fit.scale, fit.offset) == pytest.approx((scale, offset)) and again[-1].probability is None
    with pytest.raises(ValueError, match="no judged labels"):
        je.calibrate([je.Judged(je.Label("e", None, "a", True, "x:e"), None, "boom")])


def test_shipped_label_sets_are_large_enough_and_balanced():
    cfo, invoice = je.load_labels(CFO_LABELS), je.load_labels(INVOICE_LABELS)
    assert len(cfo) + len(invoice) >= 60
    for labels in (cfo, invoice):
        positives = sum(label.met for label in labels)
        assert 0.25 < positives / len(labels) < 0.75
        assert len({(label.trajectory_key, label.item_id) for label in labels}) == len(labels)


def test_bad_label_lines_name_file_and_line(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"trajectory": {"id": "x", "messages": []}, "item_id": "a", "met": true}\n'
                    '{"trajectory": "missing.json", "item_id": "a", "met": true}\n')
    with pytest.raises(je.LabelsError, match=r"labels.jsonl:2: trajectory file .*missing.json not found"):
        je.load_labels(path)
    path.write_text('{"trajectory": {"id": "x", "messages": []}, "item_id": "a", "met": "yes"}\n')
    with pytest.raises(je.LabelsError, match=r"labels.jsonl:1: 'met' must be true or false"):
        je.load_labels(path)


def asked_labels(labels, rubric=None):
    """The labels whose item the judge is asked (a missing fact decides the others without it)."""
    from rubrics.judges import NoJudge

    pairs, _ = je.judge_labels(labels, rubric or INVOICE_RUBRIC, NoJudge())
    decided = {pair.label.source for pair in pairs if pair.facts_missing}
    return [label for label in labels if label.source not in decided]


def oracle_for(labels):
    """A scripted judge that knows the labels of the invoice set (and says 0.5 for unlabelled items)."""
    truth = {(label.trajectory.id, label.item_id): label.met for label in labels}
    return ScriptedJudge(lambda r: Verdict(
        met=truth.get((r.context.trajectory_id, r.item.id), False),
        probability=0.9 if truth.get((r.context.trajectory_id, r.item.id)) else 0.2))


def test_judge_labels_grades_each_trajectory_once_and_pairs_labels():
    labels = je.load_labels(INVOICE_LABELS)
    judge = oracle_for(labels)
    from rubrics.rubric.load import load_rubric

    pairs, skipped = je.judge_labels(labels, load_rubric(INVOICE_RUBRIC), judge)
    assert not skipped and len(pairs) == len(labels)
    assert len(judge.calls) == 1  # one batch
    assert len({r.context.trajectory_id for r in judge.calls[0]}) == 10
    report = je.evaluate(pairs)
    assert report.overall.accuracy == 1.0 and report.overall.kappa == 1.0


def test_no_examples_wrapper_strips_few_shot_examples():
    from rubrics.judges.protocol import JudgeExample
    from test_judge_prompts import request

    inner = ScriptedJudge()
    original = request(examples=(JudgeExample("e", True),), threshold=0.7, method="likelihood")
    je.ExamplesRemoved(inner).judge([original])
    sent = inner.calls[0][0]
    assert sent.item.examples == () and original.item.examples   # the caller's request is left as it was
    # only the examples go: the context and the item's other options are the same
    assert sent.context == original.context and sent.item == replace(original.item, examples=())


def test_judge_eval_command_prints_agreement(monkeypatch, capsys):
    from rubrics.cli.main import main
    from rubrics.judges import factory

    labels = je.load_labels(INVOICE_LABELS)
    monkeypatch.setattr(factory, "build_judge", lambda spec: oracle_for(labels))
    assert main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--fit-thresholds",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["labels"] == 50 and out["report"]["overall"]["accuracy"] == 1.0
    assert set(out["fitted_thresholds"]) == {"root-cause", "uses-decimal", "reports-tests", "edits-tests",
                                             "overclaims"}
    assert main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC)]) == 0
    table = capsys.readouterr().out
    assert "OVERALL" in table and "kappa" in table


def test_fit_calibration_needs_a_method(capsys):
    from rubrics.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--fit-calibration"])
    assert exit_.value.code == 2 and "--fit-calibration and --cross-validate need --method" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["choice", "likelihood"])
def test_fit_calibration_fits_any_methods_calibration_on_identity_judgments(monkeypatch, capsys, method):
    from rubrics.cli.main import main
    from rubrics.judges import extras
    from rubrics.judges.methods import IDENTITY

    labels = je.load_labels(INVOICE_LABELS)
    built = {}

    def fake_embedded(**options):   # the judge the command builds: the method's raw score, uncalibrated
        built.update(options)
        return oracle_for(labels)

    monkeypatch.setattr(extras, "require_engine", lambda: None)
    monkeypatch.setattr(extras, "import_judge_class", lambda module, name: fake_embedded)
    assert main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--method", method,
                 "--fit-calibration", "--format", "json"]) == 0
    assert built == {"method": method, "calibrations": {method: IDENTITY}}
    out = json.loads(capsys.readouterr().out)
    c = out["calibration"][method]
    assert list(out["calibration"]) == [method] and c["scale"] > 0
    # the fit of the labels on the logit of the oracle's probabilities (0.9 when met, 0.2 otherwise)
    pairs = [(label.met, 0.9 if label.met else 0.2) for label in asked_labels(labels)]
    assert (c["scale"], c["offset"]) == pytest.approx(fit_logistic([logit(p) for _, p in pairs],
                                                                   [y for y, _ in pairs]))
    assert main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--method", method,
                 "--fit-calibration"]) == 0
    table = capsys.readouterr().out
    assert f"{method} calibration (logistic fit, in-sample): scale = " in table and "calibrated in-sample" in table


def test_judge_eval_of_a_panel_reports_member_agreement_and_each_member(tmp_path, capsys):
    """A panel of two embedded methods on the real engine (a tiny random model over the embedded tokenizer)."""
    from judge_models import tiny_judge_model
    from rubrics.cli.main import main

    model = tiny_judge_model(str(tmp_path))
    assert main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--model", str(model),
                 "--panel-member", "embedded:choice", "--panel-member", "embedded:likelihood",
                 "--panel-combine", "majority", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    panel = out["panel"]
    asked = len(asked_labels(je.load_labels(INVOICE_LABELS)))   # 50 labels, 4 decided by a missing fact
    assert panel["agreement"]["members"] == ["embedded:choice", "embedded:likelihood"]
    assert panel["agreement"]["items"] == asked == 46 and -1.0 <= panel["agreement"]["kappa"] <= 1.0
    assert set(panel["members"]) == {"embedded:choice", "embedded:likelihood"}
    assert all(member["n"] == asked for member in panel["members"].values())
    assert out["judge"] == "panel[majority](embedded:choice, embedded:likelihood)"
    assert main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--model", str(model),
                 "--panel-member", "embedded:choice", "--panel-member", "embedded:likelihood"]) == 0
    assert "panel agreement: Fleiss' kappa" in capsys.readouterr().out


def test_a_panel_goes_without_method_fits(capsys):
    from rubrics.cli.main import main

    with pytest.raises(SystemExit):
        main(["judge-eval", str(INVOICE_LABELS), "--rubric", str(INVOICE_RUBRIC), "--panel-member", "embedded",
              "--panel-member", "embedded:choice", "--fit-calibration", "--method", "choice"])
    assert "--panel-member" in capsys.readouterr().err
