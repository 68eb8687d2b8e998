"""The judge on ground truth nobody on this project wrote: WiCE claim support (Kamoi et al., EMNLP 2023).

    python benchmarks/wice.py --data WICE_DEV.jsonl [--model NAME ...] [--claims all|clear] [--limit N]
                              [--verdict-cache DB] [--json FILE]

WICE_DEV.jsonl is WiCE's development split at claim level with oracle chunks (github.com/ryokamoi/wice,
code_and_resources/entailment_inputs/oracle_chunks/claim/dev.jsonl): one row per chunk of cited web evidence,
{"label": supported | partially_supported | not_supported, "claim", "evidence": [sentences], "meta": {"id", ...}}.
Each chunk is judged as a rubric item is: the embedded judge with the model's own method and shipped calibration,
its instructions and fences unchanged; the evidence is the chunk, the item "the evidence supports every part of
this claim: CLAIM". A claim's probability is its best chunk's (as WiCE scores it). The binary task as published:
supported against partially supported and not supported. Reported: AUC (threshold-free), balanced accuracy, F1
(positive = supported) and accuracy at the shipped threshold 0.5; and the clear-cut claims (supported against not
supported) apart. --claims clear judges only those (a third of the chunks, for a model that needs hours for all).

Nothing is fitted, tuned or chosen on this data: the prompt, method, calibration and threshold are the product's.
The published figures of other judges (docs/judge-quality.md) were measured on WiCE's test split, not this one.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TASK = "Find evidence on the web for a claim made in a Wikipedia article."
CRITERION = "the evidence supports every part of this claim: {claim}"
LABELS = ("supported", "partially_supported", "not_supported")


def read_claims(path: Path) -> dict[str, dict]:
    """{claim id: {"claim", "label", "chunks": [evidence text, ...]}}, in file order."""
    claims: dict[str, dict] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row["label"] not in LABELS:
            raise SystemExit(f"{path}:{number}: label {row['label']!r} is not one of {', '.join(LABELS)}")
        entry = claims.setdefault(str(row["meta"]["id"]), {"claim": row["claim"], "label": row["label"],
                                                           "chunks": []})
        entry["chunks"].append(" ".join(row["evidence"]))
    return claims


def requests_of(claims: dict[str, dict]) -> list:
    from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeItem, JudgeRequest

    requests = []
    for claim_id, entry in claims.items():
        item = JudgeItem(id=f"claim-{claim_id}", kind="criterion", points=1,
                         criterion=CRITERION.format(claim=entry["claim"]))
        for number, chunk in enumerate(entry["chunks"]):
            context = JudgeContext(f"{claim_id}/{number}", TASK, None, (EvidenceBlock("evidence", chunk),))
            requests.append(JudgeRequest(context, item))
    return requests


PROGRESS_EVERY = 48


def figures(scored: list[tuple[bool, float]]) -> dict:
    """AUC, and at the threshold 0.5: balanced accuracy, F1 (positive = supported) and accuracy."""
    from rubrics.trust.metrics import agreement

    a = agreement(scored, 0.5)
    tp = sum(1 for y, p in scored if y and p >= 0.5)
    fp = sum(1 for y, p in scored if not y and p >= 0.5)
    fn = sum(1 for y, p in scored if y and p < 0.5)
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"claims": a.n, "supported": a.positives, "auc": a.auc, "balanced_accuracy": a.balanced_accuracy,
            "f1": f1, "accuracy": a.accuracy, "brier": a.brier}


def judge_model(model: str, claims: dict[str, dict], cache: str | None) -> dict:
    from rubrics.judges.backends.embedded import EmbeddedJudge

    judge = EmbeddedJudge(model)
    if cache:
        from rubrics.judges.cache.cached import CachedJudge
        from rubrics.judges.cache.verdict_cache import VerdictCache

        judge = CachedJudge(judge, VerdictCache(cache))
    requests = requests_of(claims)
    started = time.perf_counter()
    verdicts = []
    # in slices, so that a verdict cache keeps what a long run judged if it is stopped, and the log shows progress
    for start in range(0, len(requests), PROGRESS_EVERY):
        verdicts += judge.judge(requests[start:start + PROGRESS_EVERY])
        print(f"  {model}: {len(verdicts)}/{len(requests)} chunks judged, {time.perf_counter() - started:.0f}s",
              flush=True)
    seconds = time.perf_counter() - started
    best: dict[str, float] = defaultdict(float)
    errors = 0
    for request, verdict in zip(requests, verdicts):
        claim_id = request.context.trajectory_id.split("/")[0]
        if verdict.probability is None:
            errors += 1
            continue
        best[claim_id] = max(best[claim_id], verdict.probability)
    judged = {cid: entry for cid, entry in claims.items() if cid in best}
    binary = [(entry["label"] == "supported", best[cid]) for cid, entry in judged.items()]
    clear = [(entry["label"] == "supported", best[cid]) for cid, entry in judged.items()
             if entry["label"] != "partially_supported"]
    return {"model": model, "method": judge.method, "chunks": len(requests), "chunk_errors": errors,
            "seconds": seconds, "chunks_per_second": len(requests) / seconds if seconds else None,
            "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "load_average": os.getloadavg()[0],
            "supported_vs_rest": figures(binary), "clear_cut": figures(clear),
            "probabilities": {cid: best[cid] for cid in judged}}


def row(report: dict, subset: str) -> str:
    f = report[subset]
    cell = lambda value: "-" if value is None else f"{value:.2f}"  # noqa: E731
    return (f"| {report['model']} ({report['method']}) | {subset.replace('_', ' ')} | {f['claims']} | "
            f"{f['supported']} | {cell(f['auc'])} | {cell(f['balanced_accuracy'])} | {cell(f['f1'])} | "
            f"{cell(f['accuracy'])} |")


def main() -> None:
    import torch

    from rubrics.judges.fitted.judge_models import JUDGE_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="WiCE's dev.jsonl (claim level, oracle chunks)")
    parser.add_argument("--model", action="append", help="a catalog model (repeatable); default: every one")
    parser.add_argument("--claims", choices=("all", "clear"), default="all",
                        help="clear: only the supported and not-supported claims")
    parser.add_argument("--limit", type=int, help="only the first N claims of the file (a quick look)")
    parser.add_argument("--verdict-cache", metavar="DB", help="keep the verdicts here, so a rerun reads them back")
    parser.add_argument("--json", type=Path, help="also write the reports here")
    args = parser.parse_args()
    claims = read_claims(args.data)
    if args.claims == "clear":
        claims = {cid: entry for cid, entry in claims.items() if entry["label"] != "partially_supported"}
    if args.limit:
        claims = dict(list(claims.items())[:args.limit])
    models = args.model or list(JUDGE_MODELS)
    chunks = sum(len(entry["chunks"]) for entry in claims.values())
    print(f"WiCE dev: {len(claims)} claims ({args.claims}), {chunks} chunks; {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    reports = []
    for model in models:
        report = judge_model(model, claims, args.verdict_cache)
        reports.append(report)
        print(f"{model}: {report['chunks']} chunks in {report['seconds']:.0f}s ({report['chunks_per_second']:.2f}/s), "
              f"{report['chunk_errors']} errors, peak RSS {report['peak_rss_gib']:.2f} GiB, load average "
              f"{report['load_average']:.1f}", flush=True)
    print("\n| judge | claims | n | supported | AUC | balanced acc. (0.5) | F1 | accuracy |")
    print("|---|---|---|---|---|---|---|---|")
    for report in reports:
        for subset in ("supported_vs_rest", "clear_cut"):
            print(row(report, subset))
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
