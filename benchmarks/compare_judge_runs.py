"""Two runs of benchmarks/judge_quality.py (their --json files) compared on the same labels, from their raw P(met)
(the method's score before any calibration, so both are read alike): balanced accuracy at 0.5, AUC and Brier on the
clear and the hard labels, same-item pairs ranked, near misses caught, and how far the probabilities are apart.
For a change of numerics (int8 against float32, say) where no calibration of the new numerics is fitted yet;
`--calibration SCALE OFFSET` applies one calibration (say, the one fitted for the first run's numerics on the
training domains) to both runs' raw scores, so that the figures at the threshold are read as a user would get them.

    python benchmarks/compare_judge_runs.py NAME=RUN.json NAME=RUN.json [--method choice] [--calibration S O]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_quality import line_of, load_labelled  # noqa: E402


def calibrated(probability: float | None, scale: float, offset: float) -> float | None:
    """A raw P(met) (the method's score through the identity calibration) under Calibration(scale, offset)."""
    if probability is None:
        return None
    from rubrics.judges.fitted.logistic import logit
    from rubrics.judges.methods import Calibration

    return Calibration(scale, offset).probability(logit(probability))


def judged_from(raw: dict[str, float | None], labels: list) -> list:
    from rubrics.trust.metrics import Judged

    keyed = ((label, f"{label.domain}:{line_of(label.source)}") for label in labels)
    return [Judged(label, raw[key], None) for label, key in keyed if key in raw]


def figures(judged: list) -> dict:
    """The figures both scripts print: clear and hard balanced accuracy (at 0.5), AUC, Brier (clear), pairs
    ranked, near misses caught (a share of `near_misses`)."""
    from rubrics.trust import metrics

    summary = metrics.summary(judged)
    clear, hard = summary["by_difficulty"]["clear"], summary["by_difficulty"]["hard"]
    return {"clear_balanced_accuracy": clear["balanced_accuracy"], "clear_auc": clear["auc"],
            "hard_balanced_accuracy": hard["balanced_accuracy"], "hard_auc": hard["auc"], "clear_brier": clear["brier"],
            "clear_pairs_ranked": summary["clear_pairs_ranked"],
            "near_miss_pairs_ranked": summary["near_miss_pairs_ranked"],
            "near_misses_caught": summary["near_misses_caught"], "near_misses": summary["near_misses"]}


def describe(name: str, judged: list) -> str:
    f = figures(judged)
    return (f"{name}: {len(judged)} labels; clear bal. acc. {f['clear_balanced_accuracy']:.3f}, AUC "
            f"{f['clear_auc']:.3f}, Brier {f['clear_brier']:.3f}; hard bal. acc. {f['hard_balanced_accuracy']:.3f}, "
            f"AUC {f['hard_auc']:.3f}; clear pairs ranked {f['clear_pairs_ranked']:.3f}, near-miss pairs ranked "
            f"{f['near_miss_pairs_ranked']:.3f}, near misses caught {f['near_misses_caught']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs=2, metavar="NAME=RUN.json")
    parser.add_argument("--method", default="choice")
    parser.add_argument("--calibration", nargs=2, type=float, metavar=("SCALE", "OFFSET"),
                        help="apply sigmoid(SCALE * logit(p) + OFFSET) to both runs' raw probabilities")
    args = parser.parse_args()
    labels = [label for labelled, _ in load_labelled() for label in labelled]
    raws = {}
    for spec in args.runs:
        name, _, path = spec.partition("=")
        raws[name] = json.loads(Path(path).read_text())[args.method]["raw"]
        if args.calibration:
            raws[name] = {key: calibrated(p, *args.calibration) for key, p in raws[name].items()}
    shared = set.intersection(*(set(raw) for raw in raws.values()))
    for name, raw in raws.items():
        print(describe(name, judged_from({k: v for k, v in raw.items() if k in shared}, labels)))
    first, second = raws.values()
    gaps = [abs(first[k] - second[k]) for k in shared if first[k] is not None and second[k] is not None]
    print(f"|P(met) difference| over {len(gaps)} labels: max {max(gaps):.3f}, mean {statistics.mean(gaps):.3f}")


if __name__ == "__main__":
    main()
