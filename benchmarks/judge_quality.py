"""How well each judge method agrees with the hand-labelled sets, on domains it was not fitted on: the README's table.

    python benchmarks/judge_quality.py [--model NAME|PATH] [--method NAME ...] [--head] [--split FILE|none]
                                       [--json FILE] [--verdict-cache DB] [--write-calibration] [--write-head]
                                       [--features-cache DIR] [--head-train-trajectories K]
                                       [--quantization int8|int8-weights|none] [--held-out-only [--domain NAME ...]]
                                       [--rubric-variant NAME] [--mode reasoned] [--record-quality]

For every labelled set under examples/labels/ (one domain each: its labels.jsonl, graded with the rubric.yaml
beside it, or examples/<domain>/rubric.yaml for the two example rubrics), every method asked grades every
labelled trajectory with the embedded judge and its identity calibration (raw scores). Then, per method, with the
fixed split (examples/labels/split.yaml, the default):
- held-out domains: the calibration (scale, offset) fitted on the training domains, applied to the held-out ones;
  the headline figure;
- train, one domain out: over the training domains, each one's calibration fitted on the other training domains;
- held-out domains, as shipped: the same held-out labels under the calibration shipped for the model
  (rubrics/judges/fitted/calibrations/; identity outside the catalog), and under identity (raw scores).
With --split none, the older report: each domain left out in turn over every domain, and in-sample.
--held-out-only: only the held-out domains are judged (a quarter of the labels), under the model's shipped
calibration, which was fitted on training domains only (the nine first); nothing is fitted.
--domain NAME (with --held-out-only): only those held-out domains; the JSON report keeps every label's raw
probability ("raw"; the head's report "choice_raw"), so two runs on the same labels compare label by label.
--record-quality: each zero-shot method's held-out figures under the shipped calibration into quality.json (what
`rubric model list` shows), no calibration written (with --held-out-only: a model measured on the split without
a pass over every training label).
--rubric-variant parts: each domain judged with its rubric.parts.yaml where it has one: the same rubric with each
item that joins several requirements cut into its parts (judge: parts:, met when every part is).
--mode reasoned: every item judged in reasoned mode (a greedy rationale first, then the answer).
--head: the verdict head (rubric judge-train) trained on the training domains' labels only (layer and weight decay
chosen leaving training domains out), measured on the held-out domains, with 50, 200 and all training labels (the
learning curve). Its features come from one pass of the choice prompt, which gives the choice method's figures too.
--head-train-trajectories K: the head trained on the labels of K trajectories of each training domain (drawn by a
seed of the domain's name before anything is judged), for a model whose pass over all 1,950 costs hours on a CPU.
Figures are split by label difficulty (clear: the evidence plainly decides; hard: needs inference). AUC is the
share of (met, unmet) pairs of labels where the met one gets the higher probability (ties half). "pairs" is
the share of same-item pairs of clear labels, one met and one unmet, where the met one gets the higher
probability. "near misses caught": of the labels marked near_miss (unmet, though the work addresses the
criterion), the share judged unmet. It is the same computation as `rubric judge-eval ... --method NAME --cross-validate domain`.
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

# the fits, the heads and the shipped files are the trust lifecycle's: this script judges, reports and asks for them
from rubrics.trust.lifecycle import (line_of, method_report, raw_probabilities,  # noqa: E402
                                     record_shipped_quality, shipped_calibrations, write_shipped_calibration,
                                     write_shipped_head)


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # Linux reports KiB


def labelled_sets(domains=None, variant: str | None = None) -> list[tuple[Path, Path]]:
    """(labels file, rubric) of every domain (or of those named), sorted by domain; with a variant, the domain's
    rubric.<variant>.yaml where it has one (the same rubric written another way, e.g. its items cut into parts)."""
    sets = []
    for labels in sorted(LABELS.glob("*/labels.jsonl")):
        if domains is not None and labels.parent.name not in domains:
            continue
        own = labels.parent / "rubric.yaml"
        rubric = own if own.exists() else REPO / "examples" / labels.parent.name / "rubric.yaml"
        other = labels.parent / f"rubric.{variant}.yaml" if variant else None
        sets.append((labels, other if other is not None and other.exists() else rubric))
    return sets


def load_labelled(domains=None) -> list[tuple[list, object]]:
    from rubrics import trust as je
    from rubrics.rubric.load import load_rubric

    return [(je.load_labels(labels), load_rubric(rubric)) for labels, rubric in labelled_sets(domains)]


def in_mode(rubric, mode: str | None):
    """The rubric with every judge item in this mode (its `judge:` defaults' mode; items that set one keep it)."""
    from rubrics.rubric.spec import JudgeDefaults

    if mode is None:
        return rubric
    defaults = rubric.judge or JudgeDefaults()
    return rubric.model_copy(update={"judge": defaults.model_copy(update={"mode": mode})})


class Calibrated:
    """The judge's verdicts (made with the identity calibration, so that they share the verdict cache with every
    other run) under a calibration, as the judge would give them with it: what group grading must start from to
    rank with the shipped calibration's probabilities. Comparisons pass through."""

    def __init__(self, judge, calibration):
        self.inner, self.calibration, self.name = judge, calibration, judge.name
        if callable(getattr(judge, "compare", None)):
            self.compare = judge.compare

    def judge(self, requests):
        from dataclasses import replace

        from rubrics.judges.fitted.logistic import logit

        out = []
        for request, verdict in zip(requests, self.inner.judge(requests)):
            if verdict.probability is not None:
                probability = self.calibration.probability(logit(verdict.probability))
                verdict = replace(verdict, probability=probability, met=probability >= request.item.threshold)
            out.append(verdict)
        return out


def judge_all(method: str, llm, model: str | None, cache_path: str | None, domains=None,
              variant: str | None = None, mode: str | None = None, comparisons: int | None = None,
              calibration=None) -> list:
    """Every label of those domains judged. comparisons: each domain's labelled trajectories graded as one group of
    attempts (rubrics.score_group), under `calibration` (the judgments then carry it: report them with none)."""
    from rubrics import trust as je
    from rubrics.judges.backends.embedded import EmbeddedJudge
    from rubrics.judges.methods import IDENTITY
    from rubrics.rubric.load import load_rubric

    judge = EmbeddedJudge(model, method=method, calibrations={method: IDENTITY}, llm=llm)
    if cache_path:   # a rerun (a changed table, another figure) reads the verdicts back instead of judging again
        from rubrics.judges.cache.cached import CachedJudge
        from rubrics.judges.cache.verdict_cache import VerdictCache

        judge = CachedJudge(judge, VerdictCache(cache_path))
    if calibration is not None:
        judge = Calibrated(judge, calibration)
    judged = []
    for labels, rubric in labelled_sets(domains, variant):
        part, skipped = je.judge_labels(je.load_labels(labels), in_mode(load_rubric(rubric), mode), judge,
                                        comparisons)
        if skipped:
            raise SystemExit(f"{labels}: labels on unknown items: {skipped[:3]}")
        judged += part
        print(f"  {labels.parent.name}: {len(part)} labels judged ({time.strftime('%H:%M:%S')})", flush=True)
    return judged


def cached_examples(labels_path: Path, rubric_path: Path, labelled: tuple, judge, layers, cache: Path | None):
    """One labelled set's head features, read back from the features cache when they were extracted before (a
    file per set, keyed by the judge model, the probe layers and the bytes of the labels, rubric and trajectories),
    so an interrupted run resumes where it stopped."""
    import hashlib

    import torch

    from rubrics.trust import head_training as ht

    if cache is None:
        return ht.extract_examples([labelled], judge)
    # the labels judged (a set may be a sample of its trajectories' labels) are part of the key
    chosen = sorted(line_of(label.source) for label in labelled[0])
    digest = hashlib.sha256(json.dumps([judge.identity().to_dict(), list(layers), chosen]).encode())
    for path in [labels_path, rubric_path, *sorted((labels_path.parent / "trajectories").glob("*"))]:
        digest.update(path.read_bytes())
    file = cache / f"{labels_path.parent.name}-{digest.hexdigest()[:16]}.pt"
    # by line number: a label's source names its file by the path of the checkout that read it
    labels = {line_of(label.source): label for label in labelled[0]}
    if file.is_file():
        saved = torch.load(file)
        return [ht.Example(labels[line_of(source)], hidden, raw) for source, hidden, raw in
                zip(saved["sources"], saved["hidden"], saved["choice_raw"])], saved["left_out"]
    examples, left_out = ht.extract_examples([labelled], judge)
    cache.mkdir(parents=True, exist_ok=True)
    torch.save({"sources": [e.label.source for e in examples], "hidden": [e.hidden for e in examples],
                "choice_raw": [e.choice_raw for e in examples], "left_out": left_out}, file)
    return examples, left_out


def sampled_trajectories(labels: list, per_domain: int, domain: str) -> list:
    """The labels of `per_domain` trajectories of a domain, drawn by a seed of the domain's name alone (never by a
    figure): a training sample for a model whose pass over every training label costs hours."""
    import random

    keys = sorted({label.trajectory_key for label in labels})
    chosen = set(random.Random(f"head-train:{domain}").sample(keys, min(per_domain, len(keys))))
    return [label for label in labels if label.trajectory_key in chosen]


def head_report(llm, model: str | None, split, cache: Path | None = None,
                train_trajectories: int | None = None) -> tuple[dict, dict]:
    """The head trained on the training domains (with 50, 200 and all their labels; with train_trajectories, on
    the labels of that many trajectories of each training domain), measured on the held-out domains; the choice
    method's report from the same pass; and the head trained on every training label it had."""
    import random

    from rubrics import trust as je
    from rubrics.trust import head_training as ht
    from rubrics.judges.backends.embedded import EmbeddedJudge
    from rubrics.judges.fitted.logistic import sigmoid
    from rubrics.judges.fitted.verdict_head import HeadProbe

    layers = ht.candidate_layers(llm.num_layers)
    judge = EmbeddedJudge(model, method="head", head=HeadProbe(layers), llm=llm)
    examples, left_out = [], []
    # the held-out domains first: a run cut short already has the held-out figures' features
    sets = sorted(zip(labelled_sets(), load_labelled()), key=lambda s: s[0][0].parent.name not in split.held_out)
    for (labels_path, rubric_path), (labels, rubric) in sets:
        if train_trajectories is not None and labels_path.parent.name in split.train:
            labels = sampled_trajectories(labels, train_trajectories, labels_path.parent.name)
        part, part_left_out = cached_examples(labels_path, rubric_path, (labels, rubric), judge, layers, cache)
        examples += part
        left_out += part_left_out
        print(f"  head features: {labels_path.parent.name} ({len(part)} labels), load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    train = [e for e in examples if e.label.domain in split.train]
    held = [e for e in examples if e.label.domain in split.held_out]
    choice = [je.Judged(e.label, sigmoid(e.choice_raw), None) for e in examples]
    curve, head = {}, None
    ordered = sorted(train, key=lambda e: e.label.source)
    for size in (50, 200, len(train)):
        if size > len(train):
            continue
        chosen = ordered if size == len(train) else random.Random(size).sample(ordered, size)
        selection = ht.select_and_fit(chosen, layers)
        if size == len(train):
            head = ht.as_head(selection.fit, judge.identity(), chosen)
        probabilities = ht.head_probabilities(selection.fit, held, layers)
        judged = [je.Judged(e.label, p, None) for e, p in zip(held, probabilities)]
        curve[str(size) if size < len(train) else "all"] = {
            "labels": size, "layer": selection.fit.layer, "weight_decay": selection.fit.weight_decay,
            # the head on all training labels is the headline, with its figures per held-out domain
            "held_out": je.summary_with_domains(judged) if size == len(train) else je.summary(judged)}
    report = {"held_out": curve["all"]["held_out"], "learning_curve": curve, "layers": list(layers),
              "choice_raw": raw_probabilities(choice),
              "left_out": left_out, "train_trajectories_per_domain": train_trajectories,
              "labels_judged": len(examples) + len(left_out)}
    return report, method_report("choice", choice, split, shipped_calibrations(model, llm)), head


def blocks(report: dict) -> list[tuple[str, dict]]:
    """The report's figures, headline first, as (title, summary) pairs."""
    if "learning_curve" in report:   # the head
        return [(f"trained on {c['labels']} train labels" if name != "all" else "trained on train domains",
                 c["held_out"]) for name, c in reversed(report["learning_curve"].items())]
    if "held_out" in report:         # a method, on the split
        return [("held-out domains", report["held_out"]),
                ("held-out domains, as shipped", report["held_out_as_shipped"]),
                ("held-out domains, identity", report["held_out_identity"]),
                ("train, one domain out", report["train"]["leave_one_domain_out"])]
    if "held_out_as_shipped" in report:   # --held-out-only
        return [("held-out domains, as shipped", report["held_out_as_shipped"])]
    return [("held-out domain", report["leave_one_domain_out"]), ("in-sample", report["in_sample"]),
            ("as shipped", report["as_shipped"])]


def per_domain_blocks(report: dict) -> dict[str, dict]:
    if "held_out" in report:
        return report["held_out"]["per_domain"]
    if "held_out_as_shipped" in report:   # --held-out-only
        return report["held_out_as_shipped"]["per_domain"]
    return report["leave_one_domain_out"]["per_domain"]


def table(reports: dict[str, dict]) -> str:
    def cell(value):
        return "-" if value is None else f"{value:.2f}"

    lines = ["| method | calibration | labels | n | accuracy | balanced acc. | AUC | kappa | Brier "
             "| clear pairs ranked | near-miss pairs ranked | near misses caught |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for method, report in reports.items():
        for title, block in blocks(report):
            for difficulty in ("clear", "hard"):
                a = block["by_difficulty"][difficulty]
                pairs = cell(block["clear_pairs_ranked"]) if difficulty == "clear" else ""
                near_pairs = cell(block.get("near_miss_pairs_ranked")) if difficulty == "clear" else ""
                near = f"{cell(block.get('near_misses_caught'))} of {block.get('near_misses', 0)}" \
                    if difficulty == "clear" else ""
                lines.append(f"| {method} | {title} | {difficulty} | {a['n']} | {cell(a['accuracy'])} | "
                             f"{cell(a['balanced_accuracy'])} | {cell(a.get('auc'))} | {cell(a['kappa'])} | "
                             f"{cell(a['brier'])} | {pairs} | {near_pairs} | {near} |")
    return "\n".join(lines)


def per_domain(reports: dict[str, dict]) -> str:
    methods = list(reports)
    domains = list(per_domain_blocks(next(iter(reports.values()))))
    lines = ["| held-out domain (clear labels, balanced acc.) | " + " | ".join(methods) + " |",
             "|---|" + "---|" * len(methods)]
    for domain in domains:
        cells = []
        for method in methods:
            a = per_domain_blocks(reports[method]).get(domain, {}).get("by_difficulty", {}).get("clear", {})
            cells.append("-" if a.get("balanced_accuracy") is None else f"{a['balanced_accuracy']:.2f}")
        lines.append(f"| {domain} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def engine_work(before: dict, after: dict) -> dict:
    """The engine's token counts for one run (the counters' difference): what the prefix cache saved."""
    keys = ("prompt_tokens", "computed_prompt_tokens", "generated_tokens", "steps")
    work = {key: after.get(key, 0) - before.get(key, 0) for key in keys if key in after}
    print("  engine: " + ", ".join(f"{key} {value:,}" for key, value in work.items()), flush=True)
    return work


def report_speed(report: dict, what: str, started: float, total: int) -> None:
    seconds = time.perf_counter() - started
    report["speed"] = {"seconds": seconds, "judgments_per_second": total / seconds}
    print(f"{what}: judged in {seconds:.0f}s, {total / seconds:.2f} judgments/s, peak RSS {peak_rss_gib():.2f} GiB, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    import torch

    from judge_engine import LLM
    from rubrics.judges.backends.embedded import engine_defaults, with_quantization
    from rubrics.judges.fitted.judge_models import QUANTIZATION_CHOICES, default_judge_model
    from rubrics import trust as je
    from rubrics.judges.methods import METHOD_NAMES

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    zero_shot = [m for m in METHOD_NAMES if m != "head"]   # the head is trained: --head
    parser.add_argument("--method", action="append", choices=zero_shot, help="default: every zero-shot method")
    parser.add_argument("--model", help="a catalog name (rubric model list) or a local .gguf / HF folder; default: "
                                         "the default judge model")
    parser.add_argument("--json", help="also write the full reports here")
    parser.add_argument("--write-calibration", action="store_true",
                        help="write each method's fit (on the split's training domains; without the split, on every "
                             "domain) into the model's shipped calibration file "
                             "(rubrics/judges/fitted/calibrations/<catalog name>.json, other methods' entries kept) "
                             "and its held-out figures into rubrics/judges/fitted/calibrations/quality.json")
    parser.add_argument("--quantization", choices=QUANTIZATION_CHOICES,
                        help="default: the model's own, as the judge runs it (int8 for the default judge model); "
                             "under int8, --write-calibration writes the model's int8 calibration file "
                             "(<catalog name>.int8.json) and its figures under quantized.int8; none: float32 results")
    parser.add_argument("--split", default=str(LABELS / "split.yaml"),
                        help="the fixed split of domains (default: examples/labels/split.yaml); none: leave each "
                             "domain out in turn over every domain")
    parser.add_argument("--held-out-only", action="store_true",
                        help="judge only the split's held-out domains and report them under the model's shipped "
                             "calibration (fitted on training domains only: the nine first), nothing fitted; "
                             "a quarter of the work, for a method's held-out figure")
    parser.add_argument("--domain", action="append", metavar="NAME",
                        help="with --held-out-only: only these held-out domains (a paired comparison of two ways "
                             "of computing, float32 and int8 say, on a part of the held-out labels)")
    parser.add_argument("--rubric-variant", metavar="NAME",
                        help="judge each domain with its rubric.NAME.yaml where it has one (e.g. parts: the same "
                             "rubric with its items cut into parts), its rubric.yaml elsewhere; no fitting, no head")
    parser.add_argument("--mode", choices=("reasoned",),
                        help="judge every item in this mode (reasoned: a greedy rationale of the rubric's max_tokens "
                             "first, then the answer); no fitting, no head")
    parser.add_argument("--head", action="store_true",
                        help="also train a verdict head on the training domains and measure it on the held-out ones")
    parser.add_argument("--features-cache", metavar="DIR",
                        help="with --head: keep each labelled set's head features in this folder, so that a rerun "
                             "(or an interrupted run) reads them back")
    parser.add_argument("--head-train-trajectories", type=int, metavar="K",
                        help="with --head: train on the labels of K trajectories of each training domain (drawn by "
                             "a seed of the domain's name), not on all of them: for a model whose pass over the "
                             "1,950 training labels costs hours; the held-out domains are judged whole")
    parser.add_argument("--write-head", action="store_true",
                        help="with --head: write the head trained on every training label as the model's shipped "
                             "head (rubrics/judges/fitted/heads/<catalog name>.json) and its held-out figures into "
                             "rubrics/judges/fitted/calibrations/quality.json; ship it only where it beats the model's "
                             "best zero-shot method there")
    parser.add_argument("--record-quality", action="store_true",
                        help="write each zero-shot method's held-out figures under the model's shipped calibration "
                             "(what a user of the catalog model gets on a new domain) into "
                             "rubrics/judges/fitted/calibrations/quality.json; no calibration is written")
    parser.add_argument("--group", type=int, metavar="K",
                        help="with --held-out-only: grade each held-out domain's labelled trajectories as one group "
                             "of attempts (rubrics.score_group, each attempt compared side by side with K others)")
    parser.add_argument("--facts-and-groups", type=int, metavar="K",
                        help="with --held-out-only: each method judged four ways, one table: pointwise, pointwise "
                             "with each domain's rubric.facts.yaml, in groups (K comparisons an attempt), and both")
    parser.add_argument("--kv-cache-gib", type=float, metavar="GIB",
                        help="the engine's KV cache (default: the engine's); more keeps more shared prefixes (a "
                             "group's task and attempts) resident, and changes no verdict")
    parser.add_argument("--verdict-cache", metavar="DB",
                        help="keep the raw verdicts in this sqlite file, so that a rerun reads them back (its "
                             "judgments/s then measure the cache, not the model)")
    args = parser.parse_args()
    split = None if args.split == "none" else je.load_split(args.split)
    if args.held_out_only and (split is None or args.head or args.write_calibration):
        parser.error("--held-out-only needs the split, and fits nothing (no --head, no --write-calibration)")
    if args.head_train_trajectories is not None and not args.head:
        parser.error("--head-train-trajectories needs --head")
    if (args.rubric_variant or args.mode) and (args.head or args.write_calibration or args.write_head):
        parser.error("--rubric-variant and --mode measure another way of judging; they fit nothing")
    if args.head and split is None:
        parser.error("--head needs the split (its head is trained on the training domains)")
    if args.write_head and not args.head:
        parser.error("--write-head needs --head")
    if args.record_quality and (split is None or args.rubric_variant or args.mode or args.domain):
        parser.error("--record-quality records the split's held-out figures of the product's own way of judging "
                     "(every held-out domain, no --rubric-variant, no --mode)")
    if (args.group or args.facts_and_groups) and not args.held_out_only:
        parser.error("--group and --facts-and-groups measure on the held-out domains and fit nothing: add "
                     "--held-out-only")
    if args.facts_and_groups and (args.group or args.rubric_variant):
        parser.error("--facts-and-groups runs the facts variant and the groups itself: no --group, no "
                     "--rubric-variant")
    domains = split.held_out if args.held_out_only else None
    if args.domain:
        if not args.held_out_only or not set(args.domain) <= set(split.held_out):
            parser.error("--domain names held-out domains, with --held-out-only")
        domains = args.domain
    if args.rubric_variant:
        varied = [labels.parent.name for labels, rubric in labelled_sets(domains, args.rubric_variant)
                  if rubric.name == f"rubric.{args.rubric_variant}.yaml"]
        if not varied:
            parser.error(f"--rubric-variant {args.rubric_variant}: no domain has a rubric.{args.rubric_variant}.yaml")
        print(f"rubric.{args.rubric_variant}.yaml in {len(varied)} domains: {', '.join(varied)}")
    total = sum(1 for labels, _ in labelled_sets(domains) for line in labels.read_text().splitlines()
                if line.strip())
    # the judge model as the judge runs it: its own quantization unless asked, float32 activations, the product's
    # cache; loaded once every argument is checked
    model = args.model or default_judge_model()
    options = {"model": model, **({"quantization": args.quantization} if args.quantization else {}),
               **({"kv_cache_bytes": int(args.kv_cache_gib * 2**30)} if args.kv_cache_gib else {})}
    llm = LLM(**engine_defaults(with_quantization(model, options)))
    print(f"{len(labelled_sets(domains))} domains, {total} labels, judge model {model} "
          f"({llm.model_path.name}, {llm.dtype}{', ' + llm.quantization if llm.quantization else ''}), "
          f"{torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    reports = {}
    # --head alone: the head, and the choice method from the same pass
    shipped = shipped_calibrations(model, llm)
    ways = {"": (args.rubric_variant, args.group)}
    if args.facts_and_groups:
        ways = {", pointwise": (None, None), ", facts": ("facts", None),
                f", group of attempts (K={args.facts_and_groups})": (None, args.facts_and_groups),
                f", facts + group (K={args.facts_and_groups})": ("facts", args.facts_and_groups)}
    for method in args.method or ([] if args.head else zero_shot):
        for way, (variant, comparisons) in ways.items():
            from rubrics.judges.methods import IDENTITY

            started, before = time.perf_counter(), llm.stats()
            # a group ranks with the probabilities the shipped calibration gives, so its judgments carry it
            calibration = shipped.get(method, IDENTITY) if comparisons else None
            judged = judge_all(method, llm, model, args.verdict_cache, domains, variant, args.mode, comparisons,
                               calibration)
            reports[method + way] = method_report(method, judged, split, {} if comparisons else shipped,
                                                  args.held_out_only)
            report_speed(reports[method + way], method + way, started, total)
            reports[method + way]["engine"] = engine_work(before, llm.stats())
    if args.head:
        started = time.perf_counter()
        reports["head"], choice, head = head_report(llm, model, split,
                                                    Path(args.features_cache) if args.features_cache else None,
                                                    args.head_train_trajectories)
        reports.setdefault("choice", choice)
        report_speed(reports["head"], "head (features; choice from the same pass)", started,
                     reports["head"]["labels_judged"])
    print()
    print(table(reports))
    print()
    print(per_domain(reports))
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1))
    if args.write_calibration:
        write_shipped_calibration(model, llm, reports)
    if args.write_head:
        write_shipped_head(model, llm, head, reports)
    if args.record_quality:
        record_shipped_quality(model, llm, reports)


if __name__ == "__main__":
    main()
