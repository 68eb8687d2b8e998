"""How well each judge method agrees with the hand-labelled sets, leaving each domain out: the README's table.

    python benchmarks/judge_quality.py [--method NAME ...] [--json FILE]

For every labelled set under examples/labels/ (one domain each: its labels.jsonl, graded with the rubric.yaml
beside it, or examples/<domain>/rubric.yaml for the two example rubrics), every method of the registry grades
every labelled trajectory with the embedded judge and its identity calibration (raw scores). Then, per method:
- held-out domain: the calibration (scale, offset) fitted on all other domains, applied to the held-out one;
  this is what a rubric from a new domain gets, and the headline figure;
- in-sample: fitted on every domain at once (optimistic);
- as shipped: the method's built-in calibration (fitted in-sample on these labels, so also optimistic).
Figures are split by label difficulty (clear: the evidence plainly decides; hard: needs inference). "pairs" is
the share of same-item pairs of clear labels, one met and one unmet, where the met one gets the higher
probability. It is the same computation as `rubric judge-eval ... --method NAME --cross-validate domain`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LABELS = REPO / "examples" / "labels"


def labelled_sets() -> list[tuple[Path, Path]]:
    """(labels file, rubric) of every domain, sorted by domain."""
    sets = []
    for labels in sorted(LABELS.glob("*/labels.jsonl")):
        own = labels.parent / "rubric.yaml"
        sets.append((labels, own if own.exists() else REPO / "examples" / labels.parent.name / "rubric.yaml"))
    return sets


def judge_all(method: str, llm) -> list:
    from rubrics import judge_eval as je
    from rubrics.judges.embedded import EmbeddedJudge
    from rubrics.judges.methods import IDENTITY
    from rubrics.loading import load_rubric

    judge = EmbeddedJudge(method=method, calibrations={method: IDENTITY}, llm=llm)
    judged = []
    for labels, rubric in labelled_sets():
        part, skipped = je.judge_labels(je.load_labels(labels), load_rubric(rubric), judge)
        if skipped:
            raise SystemExit(f"{labels}: labels on unknown items: {skipped[:3]}")
        judged += part
    return judged


def summarise(method: str, llm) -> dict:
    from rubrics import judge_eval as je

    judged = judge_all(method, llm)
    report = je.domain_report(method, judged)
    report["as_shipped"] = je.summary(je.as_shipped(judged, method))
    return report


def table(reports: dict[str, dict]) -> str:
    def cell(value):
        return "-" if value is None else f"{value:.2f}"

    lines = ["| method | calibration | labels | n | accuracy | balanced acc. | kappa | Brier | clear pairs ranked |",
             "|---|---|---|---|---|---|---|---|---|"]
    for method, report in reports.items():
        blocks = (("held-out domain", report["leave_one_domain_out"]), ("in-sample", report["in_sample"]),
                  ("as shipped", report["as_shipped"]))
        for title, block in blocks:
            for difficulty in ("clear", "hard"):
                a = block["by_difficulty"][difficulty]
                pairs = cell(block["clear_pairs_ranked"]) if difficulty == "clear" else ""
                lines.append(f"| {method} | {title} | {difficulty} | {a['n']} | {cell(a['accuracy'])} | "
                             f"{cell(a['balanced_accuracy'])} | {cell(a['kappa'])} | {cell(a['brier'])} | {pairs} |")
    return "\n".join(lines)


def per_domain(reports: dict[str, dict]) -> str:
    methods = list(reports)
    domains = list(next(iter(reports.values()))["leave_one_domain_out"]["per_domain"])
    lines = ["| held-out domain (clear labels, balanced acc.) | " + " | ".join(methods) + " |",
             "|---|" + "---|" * len(methods)]
    for domain in domains:
        cells = []
        for method in methods:
            a = reports[method]["leave_one_domain_out"]["per_domain"][domain]["by_difficulty"]["clear"]
            cells.append("-" if a["balanced_accuracy"] is None else f"{a['balanced_accuracy']:.2f}")
        lines.append(f"| {domain} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    from judge_engine import LLM
    from rubrics.judges.embedded import engine_defaults
    from rubrics.judges.methods import METHOD_NAMES

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", action="append", choices=METHOD_NAMES, help="default: every method")
    parser.add_argument("--json", help="also write the full reports here")
    args = parser.parse_args()
    llm = LLM(**engine_defaults({}))   # the embedded model as the judge runs it: float32, the product's cache
    total = sum(1 for labels, _ in labelled_sets() for line in labels.read_text().splitlines() if line.strip())
    print(f"{len(labelled_sets())} domains, {total} labels, embedded judge model (float32)")
    reports = {}
    for method in args.method or METHOD_NAMES:
        started = time.perf_counter()
        reports[method] = summarise(method, llm)
        print(f"{method}: judged in {time.perf_counter() - started:.0f}s", flush=True)
    print()
    print(table(reports))
    print()
    print(per_domain(reports))
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
