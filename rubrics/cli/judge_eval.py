"""`rubric judge-eval LABELS.jsonl --rubric R`: how well the judge agrees with human labels.

Prints accuracy, balanced accuracy, Cohen's kappa and Brier score per judge item and overall.
--fit-thresholds proposes per-item thresholds; --fit-calibration fits the method's scale and offset.
Both fits are in-sample (the figures printed with them are optimistic on small label sets) and say so.
"""
from __future__ import annotations

import sys

from rubrics.judges.calibration_file import QUANTIZATIONS
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
    parser.add_argument("--quantization", choices=QUANTIZATIONS,
                        help="embedded judge: int8 linear maps or int8 weights (a calibration fitted so is recorded "
                             "so)")
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


def judge_all(args, judge) -> tuple[list, list[str]]:
    from rubrics import judge_eval as je
    from rubrics.rubric.load import load_rubric

    if args.no_examples:
        judge = je.ExamplesRemoved(judge)
    judged, skipped = [], []
    for index, labels_path in enumerate(args.labels):
        rubric = load_rubric(args.rubric[min(index, len(args.rubric) - 1)])
        part, part_skipped = je.judge_labels(je.load_labels(labels_path), rubric, judge)
        judged += part
        skipped += part_skipped
    return judged, skipped


def run(args) -> int:
    from rubrics import judge_eval as je

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
        from rubrics.view.judge_eval_export import VerdictRecorder

        judge = recorder = VerdictRecorder(judge)   # keeps what each verdict read, for the file's label rows
    try:
        judged, skipped = judge_all(args, judge)
    except (je.LabelsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in skipped:
        print(f"warning: {line}", file=sys.stderr)
    output = {"judge": getattr(judge, "name", "?"), "labels": len(judged)}
    panel = je.panel_report(judged)
    if panel is not None:
        output["panel"] = panel
    if args.cross_validate:
        try:
            output["cross_validation"] = je.domain_report(args.method, judged)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        judged = je.as_shipped(judged, args.method)   # the per-item report below shows the judge as it ships
        output["as_shipped"] = je.summary(judged)
    elif args.fit_calibration:
        judged, fit = je.calibrate(judged)
        fits = {args.method: fit}
        output["calibration"] = {args.method: {"scale": fit.scale, "offset": fit.offset}}
        if args.write:
            try:
                output["calibration_file"] = write_calibration(args.write, judge, fits)
                print(f"wrote the {args.method} calibration to {args.write}", file=sys.stderr)
            except (ValueError, OSError) as exc:
                print(f"error: {args.write}: {exc}", file=sys.stderr)
                return 1
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
    if args.json_out and not write_label_rows(args.json_out, output, judged, report.thresholds, recorder):
        return 1
    if args.format == "json":
        import json
        print(json.dumps(output, indent=2))
    else:
        sys.stdout.write(je.render(output))
    return 0


def write_label_rows(path: str, output: dict, judged: list, thresholds: dict, recorder) -> bool:
    from rubrics.trajectory.json_text import dumps
    from rubrics.view.judge_eval_export import export, label_rows

    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(dumps(export(output, label_rows(judged, thresholds, recorder)), indent=2) + "\n")
    except (OSError, ValueError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return False
    return True


def write_calibration(path: str, judge, fits: dict) -> str:
    """Write the fits with the identity of the judge that produced the raw scores; returns the path. A valid file
    already there for the same model and prompt layout keeps its entries for other methods; any other is
    replaced."""
    from rubrics.judges.calibration_file import CalibrationFile, CalibrationFileError, load_calibration_file

    identity = judge.identity() if callable(getattr(judge, "identity", None)) else None
    if identity is None:
        raise ValueError(f"the judge {getattr(judge, 'name', judge)!r} does not say which model it runs")
    entries = dict(fits)
    try:
        existing = load_calibration_file(path)
        existing.check(identity)
        entries = {**existing.calibrations, **fits}
    except CalibrationFileError:   # none there, or one for another judge: replaced
        pass
    CalibrationFile(identity, entries).write(path)
    return path


ENGINE_KEYS = ("prompt_tokens", "computed_prompt_tokens", "cached_prompt_tokens", "prefix_cache_hit_rate")
