"""`rubric judge-eval LABELS.jsonl --rubric R`: how well the judge agrees with human labels.

Prints accuracy, balanced accuracy, Cohen's kappa and Brier score per judge item and overall.
--fit-thresholds proposes per-item thresholds; --fit-calibration fits the method's scale and offset.
Both fits are in-sample (the figures printed with them are optimistic on small label sets) and say so.
"""
from __future__ import annotations

import sys

from rubrics.judges.fitted.judge_models import QUANTIZATION_CHOICES
from rubrics.judges.methods import METHOD_NAMES


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
    parser.add_argument("--send-key-to-rubric-urls", action="store_true",
                        help="send the API key ($RUBRICS_OPENAI_API_KEY or $OPENAI_API_KEY) to the openai:URL panel "
                             "members a rubric names too (default: only to --base-url's server and members you name)")
    parser.add_argument("--base-url", help="OpenAI-compatible server (--judge openai)")
    parser.add_argument("--method", choices=METHOD_NAMES, help="verdict method for items naming none")
    parser.add_argument("--quantization", choices=QUANTIZATION_CHOICES,
                        help="embedded judge: int8 linear maps, int8 weights or none (float32 results); default: the "
                             "model's own (int8 for the default judge model); a calibration fitted so is recorded so")
    parser.add_argument("--head", metavar="FILE", help="verdict head from `rubric judge-train`, for --method head")
    parser.add_argument("--panel-member", action="append", default=[], metavar="MEMBER",
                        help="evaluate a panel instead of one judge, once per member (embedded, embedded:METHOD or "
                             "openai:URL:MODEL); reports the members' agreement (Fleiss' kappa) and each member's "
                             "figures too")
    parser.add_argument("--panel-combine", choices=("mean_logit", "majority"), default="mean_logit",
                        help="how the panel combines its members' verdicts")
    parser.add_argument("--no-examples", action="store_true", help="drop the items' few-shot examples")
    parser.add_argument("--fit-thresholds", action="store_true", help="propose a threshold per item")
    parser.add_argument("--fit-calibration", action="store_true",
                        help="fit the method's calibration (scale and offset) by logistic regression")
    parser.add_argument("--write", metavar="CALIBRATION.json",
                        help="with --fit-calibration: write the fit to this calibration file, with the judge model's "
                             "identity and the prompt-layout version (rubric grade --calibration reads it); an "
                             "existing file for the same judge and layout keeps its other methods' entries")
    parser.add_argument("--cross-validate", choices=("domain",),
                        help="fit the method's calibration leaving each domain out and report the held-out figures "
                             "(by label difficulty, per domain, and same-item pair ranking); needs --method")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--json", metavar="OUT", dest="json_out",
                        help="also write the report with one row per label (probability, threshold, the evidence the "
                             "judge read) to this file; `rubric view OUT` shows it")
    parser.set_defaults(handler=run, parser=parser)


def make_judge(args, *, raw: bool):
    """The judge to evaluate: a panel of the --panel-member members, else --judge; raw: with the identity
    calibration for --method (fits read logit(probability))."""
    from dataclasses import replace

    from rubrics.judges.factory import JudgeSpec, build_judge
    from rubrics.judges.methods import IDENTITY

    spec = JudgeSpec.from_args(args)   # the labels' rubric is not read: no rubric panel, calibration or cache
    if args.panel_member:
        if len(args.panel_member) < 2:
            args.parser.error("a panel needs at least two --panel-member")
        try:
            return build_judge(replace(spec, kind="panel"))
        except ValueError as exc:
            args.parser.error(str(exc))
    if raw:
        spec = replace(spec, calibrations={args.method: IDENTITY})
    if spec.kind == "openai":
        try:
            return build_judge(spec)
        except ValueError as exc:
            args.parser.error(f"--judge openai: {exc}")
    return build_judge(spec)


def run(args) -> int:
    from rubrics.trust import LabelsError, lifecycle, panel_report, render

    if len(args.rubric) not in (1, len(args.labels)):
        args.parser.error("give --rubric once, or once per labels file")
    if args.judge == "openai" and not args.base_url:
        args.parser.error("--judge openai needs --base-url")
    fitting = args.fit_calibration or args.cross_validate
    if fitting and not args.method:
        args.parser.error("--fit-calibration and --cross-validate need --method (the method whose calibration is "
                          "fitted)")
    if args.write and not args.fit_calibration:
        args.parser.error("--write needs --fit-calibration (it writes the fitted calibration)")
    if args.panel_member and (fitting or args.method or args.judge != "embedded"):
        args.parser.error("--panel-member names the members' judges and methods: it goes without --method, --judge, "
                          "--fit-calibration and --cross-validate")
    judge = make_judge(args, raw=bool(fitting))   # fits work on the method's raw scores
    recorder = None
    if args.json_out:
        judge = recorder = lifecycle.VerdictRecorder(judge)   # keeps what each verdict read, for the label rows
    try:
        judged, skipped = lifecycle.judge_label_files(args.labels, args.rubric, judge, args.no_examples)
    except (LabelsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in skipped:
        print(f"warning: {line}", file=sys.stderr)
    output = {"judge": getattr(judge, "name", "?"), "labels": len(judged)}
    panel = panel_report(judged)
    if panel is not None:
        output["panel"] = panel
    if fitting:
        try:
            judged, figures, fit = lifecycle.fit_judged(judged, args.method, cross_validate=bool(args.cross_validate))
        except ValueError as exc:
            if not args.cross_validate:
                raise
            print(f"error: {exc}", file=sys.stderr)
            return 1
        output.update(figures)
        if args.write and fit is not None:   # the in-sample fit; cross-validation writes none
            try:
                output["calibration_file"] = lifecycle.write_calibration(args.write, judge, {args.method: fit})
                print(f"wrote the {args.method} calibration to {args.write}", file=sys.stderr)
            except (ValueError, OSError) as exc:
                print(f"error: {args.write}: {exc}", file=sys.stderr)
                return 1
    figures, thresholds = lifecycle.report_judged(judged, args.fit_thresholds)
    output.update(figures)
    stats = getattr(judge, "stats", None)
    if callable(stats):
        try:
            output["engine"] = {k: v for k, v in stats().items() if k in ENGINE_KEYS}
        except Exception:  # noqa: BLE001 - stats are informative only
            pass
    if args.json_out:
        try:
            lifecycle.write_label_rows(args.json_out, output, judged, thresholds, recorder)
        except (OSError, ValueError) as exc:
            print(f"error: {args.json_out}: {exc}", file=sys.stderr)
            return 1
    if args.format == "json":
        import json
        print(json.dumps(output, indent=2))
    else:
        sys.stdout.write(render(output))
    return 0


ENGINE_KEYS = ("prompt_tokens", "computed_prompt_tokens", "cached_prompt_tokens", "prefix_cache_hit_rate")
