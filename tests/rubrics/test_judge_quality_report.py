"""benchmarks/judge_quality.py's report on the fixed split (rubrics.trust.lifecycle.method_report): the headline
(calibration fitted on the training domains) and, beside it, the same held-out labels under the shipped calibration and under none, never mixed with
training labels. No model is loaded: the judgments are made up."""
import importlib.util
import random

from rubric_fakes import REPO

from rubrics.judges.methods import Calibration
from rubrics.trust.labels import Judged, Label
from rubrics.trust.lifecycle import method_report
from rubrics.trust.quality import quality_entry
from rubrics.trust.split import LabelSplit

SPLIT = LabelSplit(train=("alpha", "beta"), held_out=("gamma",))


def benchmark():
    spec = importlib.util.spec_from_file_location("judge_quality", REPO / "benchmarks" / "judge_quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def judgments(domain: str, count: int, seed: int) -> list[Judged]:
    draw = random.Random(seed)
    out = []
    for index in range(count):
        met = index % 2 == 0
        label = Label(f"{domain}/t{index // 4}", None, f"item{index % 4}", met, f"labels.jsonl:{index + 1}", domain,
                      "clear" if index % 3 else "hard", near_miss=not met and index % 5 == 1)
        # raw scores that lean the right way, with noise, all on the met side of 0.5 (an uncalibrated judge)
        out.append(Judged(label, 0.65 + (0.2 if met else 0.0) + draw.uniform(-0.1, 0.1), None))
    return out


def test_the_split_report_gives_the_held_out_labels_as_shipped_and_raw():
    module = benchmark()
    judged = judgments("alpha", 40, 1) + judgments("beta", 40, 2) + judgments("gamma", 24, 3)
    shipped = Calibration(scale=3.0, offset=-2.5)
    report = method_report("choice", judged, SPLIT, {"choice": shipped})
    for block in ("held_out", "held_out_as_shipped", "held_out_identity"):
        assert report[block]["by_difficulty"]["all"]["n"] == 24, block   # held-out labels only
    # identity: every raw score is above 0.5, so every label is judged met and no near miss is caught
    assert report["held_out_identity"]["near_misses_caught"] == 0.0
    assert report["held_out_as_shipped"]["by_difficulty"]["all"]["brier"] != \
        report["held_out_identity"]["by_difficulty"]["all"]["brier"]
    # a calibration moves probabilities monotonically: the ranking figures do not change
    assert report["held_out_as_shipped"]["by_difficulty"]["clear"]["auc"] == \
        report["held_out_identity"]["by_difficulty"]["clear"]["auc"]
    titles = [title for title, _ in module.blocks(report)]
    assert titles == ["held-out domains", "held-out domains, as shipped", "held-out domains, identity",
                      "train, one domain out"]
    assert "| choice | held-out domains, identity | clear |" in module.table({"choice": report})
    assert list(module.per_domain_blocks(report)) == ["gamma"]


def test_a_held_out_only_report_is_the_shipped_calibration_alone():
    module = benchmark()
    report = method_report("choice", judgments("gamma", 24, 3), SPLIT, {}, held_out_only=True)
    assert [title for title, _ in module.blocks(report)] == ["held-out domains, as shipped"]
    assert len(report["raw"]) == 24


def test_recorded_quality_says_the_figures_are_the_shipped_calibrations_on_the_held_out_domains():
    from rubrics.trust.quality import ON_THE_SPLIT

    module = benchmark()
    report = method_report("choice", judgments("gamma", 24, 3), SPLIT, {}, held_out_only=True)
    entry = quality_entry(report)
    assert entry["measured_on"] == ON_THE_SPLIT and entry["calibration"] == "as shipped"
    assert entry["clear_balanced_accuracy"] == report["held_out_as_shipped"]["by_difficulty"]["clear"][
        "balanced_accuracy"]
    fitted = method_report("choice", judgments("alpha", 40, 1) + judgments("beta", 40, 2) + judgments("gamma", 24, 3),
                              SPLIT, {})
    assert "calibration" not in quality_entry(fitted)   # fitted on the training domains, as written


def test_two_runs_are_compared_on_their_shared_labels_from_raw_scores(tmp_path):
    """benchmarks/compare_judge_runs.py on two made-up runs' JSON over the real labels: the same metrics for both,
    and the probabilities' gap."""
    import json
    import subprocess
    import sys

    labels = benchmark().load_labelled(["calendar-rescheduling"])[0][0]
    line_of = benchmark().line_of
    keys = [f"{label.domain}:{line_of(label.source)}" for label in labels]
    good = {key: (0.8 if label.met else 0.2) for key, label in zip(keys, labels)}
    worse = {key: 0.5 for key in keys}
    paths = []
    for name, raw in (("good", good), ("worse", worse)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"choice": {"raw": raw}}))
        paths.append(f"{name}={path}")
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare_judge_runs.py"), *paths],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith(f"good: {len(labels)} labels; clear bal. acc. 1.000")
    assert "clear pairs ranked 1.000" in out[0] and "clear pairs ranked 0.500" in out[1]
    assert out[2] == f"|P(met) difference| over {len(labels)} labels: max 0.300, mean 0.300"
