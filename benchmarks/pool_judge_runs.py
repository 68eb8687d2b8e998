"""Runs of benchmarks/judge_quality.py on separate held-out domains (their --json files) pooled into one table:
the figures of every way of judging (pointwise, facts, group, ...) over all the labels of all the runs, as one run
over those domains would print them. For group rows measured one domain at a time (a run over all ten domains
takes hours of one core): each run's raw P(met) per label is put through the calibration the benchmark applied
("as shipped": the judge model's shipped calibration of the method) and the metrics are computed once over the
union (a group's judgments already carry that calibration, since a group ranks with the calibrated
probabilities, so a group way's raw P(met) is taken as it is). A label judged in two runs is taken from the later
file on the command line.

    python benchmarks/pool_judge_runs.py RUN.json [RUN.json ...] [--model qwen2.5-coder-1.5b-instruct]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_judge_runs import calibrated, figures, judged_from  # noqa: E402
from judge_quality import load_labelled  # noqa: E402


# The table's figure columns, in order (near misses caught is printed with its count).
COLUMNS = ("clear_balanced_accuracy", "clear_auc", "hard_balanced_accuracy", "hard_auc", "clear_brier",
           "clear_pairs_ranked", "near_miss_pairs_ranked")


def shipped_calibration(model: str, method: str) -> tuple[float, float]:
    from rubrics.judges.fitted.calibration_file import load_calibration_file
    from rubrics.judges.fitted.judge_models import shipped_calibration_path

    calibration = load_calibration_file(shipped_calibration_path(model)).calibrations[method]
    return calibration.scale, calibration.offset


def pooled_raw(paths: list[Path]) -> dict[str, dict[str, float | None]]:
    """way -> label key -> raw P(met), over every run (a later run wins for a label both judged)."""
    pooled: dict[str, dict[str, float | None]] = {}
    for path in paths:
        for way, report in json.loads(path.read_text()).items():
            pooled.setdefault(way, {}).update(report["raw"])
    return pooled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN.json")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--method", default="choice")
    args = parser.parse_args()
    labels = [label for labelled, _ in load_labelled() for label in labelled]
    scale, offset = shipped_calibration(args.model, args.method)
    print("| way | labels | clear: bal. acc. | AUC | hard: bal. acc. | AUC | Brier (clear) | clear pairs ranked "
          "| near-miss pairs ranked | near misses caught |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for way, raw in pooled_raw(args.runs).items():
        if "group" not in way:
            raw = {key: calibrated(p, scale, offset) for key, p in raw.items()}
        judged = judged_from(raw, labels)
        f = figures(judged)
        print(f"| {way} | {len(judged)} | " + " | ".join(f"{f[name]:.2f}" for name in COLUMNS)
              + f" | {f['near_misses_caught']:.2f} of {f['near_misses']} |")


if __name__ == "__main__":
    main()
