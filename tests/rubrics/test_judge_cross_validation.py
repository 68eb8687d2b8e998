"""`rubric judge-eval --cross-validate domain`: each domain judged with a calibration fitted on the others only,
figures split by label difficulty, and the same-item pair ranking. The maths on made-up judgments, then the real
command on the embedded model over two small labelled sets."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_models import REPO, copied_labels
from rubrics import trust as je
from rubrics.trust import metrics
from rubrics.judges.fitted.logistic import fit_logistic, logit, sigmoid


def made_up(domain: str, item: str, met: bool, raw: float, difficulty: str = "clear", number: int = 0) -> je.Judged:
    label = je.Label(f"{domain}/{item}/{number}", None, item, met, f"{domain}.jsonl:{number}", domain, difficulty)
    return je.Judged(label, sigmoid(raw), None)


JUDGED = [made_up("a", "x", True, 2.0, number=1), made_up("a", "x", False, -1.0, number=2),
          made_up("a", "y", True, 0.5, "hard", 3), made_up("b", "x", True, 1.0, number=4),
          made_up("b", "x", False, 1.5, number=5), made_up("b", "z", False, -2.0, "hard", 6),
          made_up("c", "x", True, -0.5, number=7), made_up("c", "x", False, -1.5, number=8)]


def test_each_domain_is_calibrated_on_the_other_domains_only():
    held_out, fits = je.leave_one_domain_out(JUDGED)
    for j, out in zip(JUDGED, held_out):
        others = [k for k in JUDGED if k.label.domain != j.label.domain]
        scale, offset = fit_logistic([logit(k.probability) for k in others], [k.label.met for k in others])
        fit = fits[j.label.domain]
        assert (fit.scale, fit.offset) == pytest.approx((scale, offset))
        assert out.probability == pytest.approx(sigmoid(scale * logit(j.probability) + offset))
        assert out.label == j.label


def test_one_domain_is_refused():
    with pytest.raises(ValueError, match="2 domains or more"):
        je.leave_one_domain_out([j for j in JUDGED if j.label.domain == "a"])


def test_pairs_are_same_item_same_domain_clear_labels_met_above_unmet():
    # a/x: 2.0 > -1.0 right; b/x: 1.0 < 1.5 wrong; c/x: -0.5 > -1.5 right; hard labels and cross-domain pairs ignored
    assert je.ranked_pairs(JUDGED) == pytest.approx(2 / 3)
    tie = [made_up("a", "x", True, 0.0, number=1), made_up("a", "x", False, 0.0, number=2)]
    assert je.ranked_pairs(tie) == 0.5 and je.ranked_pairs(JUDGED[2:3]) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.9]) | st.floats(0, 1)),
                max_size=40))
def test_the_auc_is_the_share_of_met_unmet_pairs_ranked_right_ties_half(scored):
    met = [p for y, p in scored if y]
    unmet = [p for y, p in scored if not y]
    auc = metrics.roc_auc(scored)
    if not met or not unmet:
        assert auc is None
        return
    wins = sum(1.0 if m > u else 0.5 if m == u else 0.0 for m in met for u in unmet)
    assert auc == pytest.approx(wins / (len(met) * len(unmet)))


def test_the_auc_ignores_the_threshold_and_a_monotone_calibration():
    pairs = [(True, 0.9), (False, 0.2), (True, 0.4), (False, 0.6), (True, 0.6)]
    assert metrics.roc_auc(pairs) == pytest.approx((1 + 1 + 1 + 0 + 0.5 + 1) / 6)
    squashed = [(y, p ** 3) for y, p in pairs]
    assert je.agreement(pairs, 0.5).auc == je.agreement(squashed, 0.1).auc == metrics.roc_auc(pairs)


def test_agreement_is_split_by_difficulty():
    split = je.by_difficulty(JUDGED)
    assert (split["clear"].n, split["hard"].n, split["all"].n) == (6, 2, 8)


@pytest.mark.slow
def test_the_command_cross_validates_the_embedded_judge_over_two_domains(tmp_path):
    """The real command on the real model: four labels from each of two domains, the method given."""
    files, rubrics = copied_labels(tmp_path, lambda rows: rows[:4])
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "judge-eval", *files, *rubrics, "--method",
                           "statement", "--cross-validate", "domain", "--format", "json"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["labels"] == 8
    held_out = out["cross_validation"]["leave_one_domain_out"]
    assert set(held_out["per_domain"]) == {"support-refunds", "travel-booking"}
    counts = held_out["by_difficulty"]
    assert counts["all"]["n"] == 8 and counts["clear"]["n"] + counts["hard"]["n"] == 8
    fits = {domain: block["fits"]["statement"] for domain, block in held_out["per_domain"].items()}
    assert fits["support-refunds"] != fits["travel-booking"]   # each fitted on the other domain only
    assert out["as_shipped"]["by_difficulty"]["all"]["n"] == 8
    table = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "judge-eval", *files, *rubrics, "--method",
                            "statement", "--cross-validate", "domain"], capture_output=True, text=True, cwd=REPO,
                           timeout=600).stdout
    assert "held-out domain: clear" in table and "held-out figures per domain" in table


def test_near_misses_caught_counts_the_near_misses_judged_unmet():
    def near(raw: float, number: int, error: str | None = None) -> je.Judged:
        label = je.Label(f"a/x/{number}", None, "x", False, f"a.jsonl:{number}", "a", "hard", near_miss=True)
        return je.Judged(label, None if error else sigmoid(raw), error)

    judged = [*JUDGED, near(-1.0, 10), near(0.5, 11), near(-3.0, 12), near(0.0, 13, "the judge failed")]
    out = metrics.summary(judged)
    assert (out["near_misses"], out["near_misses_caught"]) == (4, 0.5)   # -1.0 and -3.0 caught; 0.5 and the error not
    assert metrics.summary(JUDGED)["near_misses_caught"] is None
