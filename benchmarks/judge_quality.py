"""How well each judge method agrees with the hand-labelled sets, leaving each domain out: the README's table.

    python benchmarks/judge_quality.py [--model NAME|PATH] [--method NAME ...] [--json FILE] [--verdict-cache DB]

For every labelled set under examples/labels/ (one domain each: its labels.jsonl, graded with the rubric.yaml
beside it, or examples/<domain>/rubric.yaml for the two example rubrics), every method of the registry grades
every labelled trajectory with the embedded judge and its identity calibration (raw scores). Then, per method:
- held-out domain: the calibration (scale, offset) fitted on all other domains, applied to the held-out one;
  this is what a rubric from a new domain gets, and the headline figure;
- in-sample: fitted on every domain at once (optimistic);
- as shipped: the method's built-in calibration (fitted in-sample on these labels, so also optimistic).
Figures are split by label difficulty (clear: the evidence plainly decides; hard: needs inference). AUC is the
share of (met, unmet) pairs of labels where the met one gets the higher probability (ties half). "pairs" is
the share of same-item pairs of clear labels, one met and one unmet, where the met one gets the higher
probability. It is the same computation as `rubric judge-eval ... --method NAME --cross-validate domain`.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LABELS = REPO / "examples" / "labels"


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # Linux reports KiB


def labelled_sets() -> list[tuple[Path, Path]]:
    """(labels file, rubric) of every domain, sorted by domain."""
    sets = []
    for labels in sorted(LABELS.glob("*/labels.jsonl")):
        own = labels.parent / "rubric.yaml"
        sets.append((labels, own if own.exists() else REPO / "examples" / labels.parent.name / "rubric.yaml"))
    return sets


def judge_all(method: str, llm, model: str | None, cache_path: str | None) -> list:
    from rubrics import judge_eval as je
    from rubrics.judges.embedded import EmbeddedJudge
    from rubrics.judges.methods import IDENTITY
    from rubrics.rubric.load import load_rubric

    judge = EmbeddedJudge(model, method=method, calibrations={method: IDENTITY}, llm=llm)
    if cache_path:   # a rerun (a changed table, another figure) reads the verdicts back instead of judging again
        from rubrics.judges.cached import CachedJudge
        from rubrics.judges.verdict_cache import VerdictCache

        judge = CachedJudge(judge, VerdictCache(cache_path))
    judged = []
    for labels, rubric in labelled_sets():
        part, skipped = je.judge_labels(je.load_labels(labels), load_rubric(rubric), judge)
        if skipped:
            raise SystemExit(f"{labels}: labels on unknown items: {skipped[:3]}")
        judged += part
    return judged


def summarise(method: str, llm, model: str | None, cache_path: str | None) -> dict:
    from rubrics import judge_eval as je

    judged = judge_all(method, llm, model, cache_path)
    report = je.domain_report(method, judged)
    report["as_shipped"] = je.summary(je.as_shipped(judged, method))
    return report


def table(reports: dict[str, dict]) -> str:
    def cell(value):
        return "-" if value is None else f"{value:.2f}"

    lines = ["| method | calibration | labels | n | accuracy | balanced acc. | AUC | kappa | Brier | clear pairs ranked |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for method, report in reports.items():
        blocks = (("held-out domain", report["leave_one_domain_out"]), ("in-sample", report["in_sample"]),
                  ("as shipped", report["as_shipped"]))
        for title, block in blocks:
            for difficulty in ("clear", "hard"):
                a = block["by_difficulty"][difficulty]
                pairs = cell(block["clear_pairs_ranked"]) if difficulty == "clear" else ""
                lines.append(f"| {method} | {title} | {difficulty} | {a['n']} | {cell(a['accuracy'])} | "
                             f"{cell(a['balanced_accuracy'])} | {cell(a.get('auc'))} | {cell(a['kappa'])} | {cell(a['brier'])} | {pairs} |")
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
    import torch

    from judge_engine import LLM
    from rubrics.judges.embedded import engine_defaults
    from rubrics.judges.judge_models import default_judge_model
    from rubrics.judges.methods import METHOD_NAMES

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", action="append", choices=METHOD_NAMES, help="default: every method")
    parser.add_argument("--model", help="a catalog name (rubric model list) or a local .gguf / HF folder; default: "
                                         "the default judge model")
    parser.add_argument("--json", help="also write the full reports here")
    parser.add_argument("--write-calibration", action="store_true",
                        help="write each method's fit on every domain into the model's shipped calibration file "
                             "(rubrics/judges/calibrations/<catalog name>.json, other methods' entries kept) and its "
                             "held-out figures into rubrics/judges/calibrations/quality.json")
    parser.add_argument("--verdict-cache", metavar="DB",
                        help="keep the raw verdicts in this sqlite file, so that a rerun reads them back (its "
                             "judgments/s then measure the cache, not the model)")
    args = parser.parse_args()
    # the judge model as the judge runs it: float32, the product's cache
    model = args.model or default_judge_model()
    llm = LLM(**engine_defaults({"model": model}))
    total = sum(1 for labels, _ in labelled_sets() for line in labels.read_text().splitlines() if line.strip())
    print(f"{len(labelled_sets())} domains, {total} labels, judge model {model} "
          f"({llm.model_path.name}, {llm.dtype}), {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    reports = {}
    for method in args.method or METHOD_NAMES:
        started = time.perf_counter()
        reports[method] = summarise(method, llm, model, args.verdict_cache)
        seconds = time.perf_counter() - started
        reports[method]["speed"] = {"seconds": seconds, "judgments_per_second": total / seconds}
        print(f"{method}: judged in {seconds:.0f}s, {total / seconds:.2f} judgments/s, peak RSS "
              f"{peak_rss_gib():.2f} GiB, load average {os.getloadavg()[0]:.1f}", flush=True)
    print()
    print(table(reports))
    print()
    print(per_domain(reports))
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1))
    if args.write_calibration:
        write_calibration(model, llm, reports)


def write_calibration(model: str, llm, reports: dict[str, dict]) -> None:
    """The fits on every shipped label (in-sample: the only fit a shipped model can have until labels of its own
    are split off) into the model's calibration file; the held-out figures into quality.json."""
    from rubrics.judges.calibration_file import CalibrationFile, load_calibration_file
    from rubrics.judges.embedded import embedded_identity
    from rubrics.judges.judge_models import CALIBRATIONS, DEFAULT_JUDGE_MODEL, JUDGE_MODELS, catalog_name_of
    from rubrics.judges.methods import Calibration
    from rubrics.judges.quality import QUALITY_FILE, quality_table

    identity = embedded_identity(model, llm)
    name = catalog_name_of(identity)
    if name is None:
        raise SystemExit(f"{model}: not a catalog model; fit its calibration with rubric judge-eval --fit-calibration")
    path = CALIBRATIONS / f"{name}.json"
    kept = dict(load_calibration_file(path).calibrations) if path.is_file() else {}
    fits = {method: Calibration(round(r["in_sample"]["fits"][method]["scale"], 4),
                                round(r["in_sample"]["fits"][method]["offset"], 4)) for method, r in reports.items()}
    CalibrationFile(identity, {**kept, **fits}).write(path)
    table = quality_table() or {"about": "benchmarks/judge_quality.py --write-calibration: balanced accuracy with "
                                         "the calibration fitted on the other domains (leave one domain out)",
                                "default": DEFAULT_JUDGE_MODEL, "models": {}}
    entry = table["models"].setdefault(name, {"methods": {}})
    for method, report in reports.items():
        held_out = report["leave_one_domain_out"]["by_difficulty"]
        entry["methods"][method] = {
            "clear_balanced_accuracy": held_out["clear"]["balanced_accuracy"],
            "hard_balanced_accuracy": held_out["hard"]["balanced_accuracy"],
            "clear_auc": held_out["clear"]["auc"], "hard_auc": held_out["hard"]["auc"],
            "clear_pairs_ranked": report["leave_one_domain_out"]["clear_pairs_ranked"],
            "brier": held_out["all"]["brier"]}
    best = JUDGE_MODELS[name].method
    if best in entry["methods"]:
        entry.update(method=best, **{k: entry["methods"][best][k] for k in
                                     ("clear_balanced_accuracy", "hard_balanced_accuracy")})
    QUALITY_FILE.write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {path} and {QUALITY_FILE}")


if __name__ == "__main__":
    main()
