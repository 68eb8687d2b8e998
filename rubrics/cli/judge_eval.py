"""`rubric judge-eval LABELS.jsonl --rubric R`: how well the judge agrees with human labels.

Prints accuracy, balanced accuracy, Cohen's kappa and Brier score per judge item and overall.
--fit-thresholds proposes per-item thresholds; --fit-calibration fits the likelihood method's scale and offset.
Both fits are in-sample (the figures printed with them are optimistic on small label sets) and say so.
"""
from __future__ import annotations

import sys

METHODS = ("choice", "likelihood")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "judge-eval", help="agreement of the judge with human labels",
        description="Grade the labelled trajectories and compare the judge's verdicts with the labels "
                    "(one JSON per line: {trajectory: PATH or object, item_id, met}).")
    parser.add_argument("labels", nargs="+", metavar="LABELS.jsonl")
    parser.add_argument("--rubric", action="append", required=True, metavar="RUBRIC",
                        help="the rubric of the labels; give it once for all files, or once per labels file")
    parser.add_argument("--judge", choices=("embedded", "openai"), default="embedded")
    parser.add_argument("--model", help="judge model (local HF folder or .gguf for embedded; a name for openai)")
    parser.add_argument("--base-url", help="OpenAI-compatible server (--judge openai)")
    parser.add_argument("--method", choices=METHODS, help="embedded judge: verdict method for items naming none")
    parser.add_argument("--no-examples", action="store_true", help="drop the items' few-shot examples")
    parser.add_argument("--fit-thresholds", action="store_true", help="propose a threshold per item")
    parser.add_argument("--fit-calibration", action="store_true",
                        help="fit the likelihood method's scale and offset by logistic regression")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.set_defaults(handler=run, parser=parser)


def build_judge(args):
    from rubrics.judges.extras import import_judge_class, make_embedded_judge

    if args.judge == "openai":
        if not args.base_url:
            args.parser.error("--judge openai needs --base-url")
        # OpenAIJudge reads its API key from the environment
        return import_judge_class("openai", "OpenAIJudge")(base_url=args.base_url, model=args.model)
    options = {"model": args.model} if args.model else {}
    if args.method:
        options["method"] = args.method
    if args.fit_calibration:
        # Raw pmi comes back as sigmoid(pmi): fit on logit(probability) = pmi.
        options.update(likelihood_scale=1.0, likelihood_offset=0.0)
    return make_embedded_judge(**options)


def run(args) -> int:
    from rubrics import judge_eval as je
    from rubrics.loading import load_rubric

    if len(args.rubric) not in (1, len(args.labels)):
        args.parser.error("give --rubric once, or once per labels file")
    if args.fit_calibration and (args.judge != "embedded" or args.method != "likelihood"):
        args.parser.error("--fit-calibration needs --judge embedded --method likelihood")
    judge = build_judge(args)
    if args.no_examples:
        judge = je.ExamplesRemoved(judge)
    judged, skipped = [], []
    for index, labels_path in enumerate(args.labels):
        rubric = load_rubric(args.rubric[min(index, len(args.rubric) - 1)])
        try:
            labels = je.load_labels(labels_path)
        except (je.LabelsError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        part, part_skipped = je.judge_labels(labels, rubric, judge)
        judged += part
        skipped += part_skipped
    for line in skipped:
        print(f"warning: {line}", file=sys.stderr)
    output = {"judge": getattr(judge, "name", "?"), "labels": len(judged)}
    if args.fit_calibration:
        judged, calibration = je.calibrate_likelihood(judged)
        output["likelihood_calibration"] = {"scale": calibration[0], "offset": calibration[1]}
    report = je.evaluate(judged)
    output["report"] = je.report_dict(report)
    if args.fit_thresholds:
        fitted = je.fit_thresholds(judged)
        output["fitted_thresholds"] = fitted
        output["report_with_fitted_thresholds"] = je.report_dict(je.evaluate(judged, fitted))
        output["leave_one_trajectory_out"] = je.report_dict(je.cross_validated(judged))
    stats = getattr(judge, "stats", None)
    if callable(stats):
        try:
            output["engine"] = {k: v for k, v in stats().items() if k in ENGINE_KEYS}
        except Exception:  # noqa: BLE001 - stats are informative only
            pass
    if args.format == "json":
        import json
        print(json.dumps(output, indent=2))
    else:
        sys.stdout.write(je.render(output))
    return 0


ENGINE_KEYS = ("prompt_tokens", "computed_prompt_tokens", "cached_prompt_tokens", "prefix_cache_hit_rate")
