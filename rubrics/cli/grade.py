"""`rubric grade RUBRIC TRAJECTORY_OR_DIR...` or `rubric grade --dataset FILE.jsonl`: grade trajectories and print
a table, JSON or JSONL (with --aggregate healthbench, HealthBench's figures too).

Exit status: 0 when every trajectory loaded and every item was evaluated; 1 when a trajectory failed
to load, an item is `error` (for instance judge items under --judge none) or the rubric is invalid;
2 for usage errors.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from rubrics.judges.fitted.judge_models import QUANTIZATION_CHOICES
from rubrics.judges.methods import METHOD_NAMES

JUDGES = ("embedded", "openai", "panel", "none")
FORMATS = ("table", "json", "jsonl")
REWARDS = ("hard", "expected")
COMBINES = ("mean_logit", "majority")
AGGREGATES = ("healthbench",)


def band(text: str) -> tuple[float, float]:
    """--uncertain LOW,HIGH: two probabilities with LOW <= HIGH; anything else is a usage error."""
    from argparse import ArgumentTypeError

    wrong = ArgumentTypeError(f"expected LOW,HIGH with 0 <= LOW <= HIGH <= 1, e.g. 0.35,0.65; got {text!r}")
    try:
        low, high = (float(part) for part in text.split(","))   # not two numbers: ValueError
    except ValueError:
        raise wrong from None
    if not 0.0 <= low <= high <= 1.0:   # also false for NaN
        raise wrong
    return low, high


def prices(text: str) -> tuple[float, float]:
    """--price-per-mtok IN,OUT: two prices >= 0 (per million prompt and generated tokens)."""
    from argparse import ArgumentTypeError

    wrong = ArgumentTypeError(f"expected IN,OUT prices per million tokens, e.g. 0.15,0.60; got {text!r}")
    try:
        price_in, price_out = (float(part) for part in text.split(","))
    except ValueError:
        raise wrong from None
    if not (0.0 <= price_in < float("inf") and 0.0 <= price_out < float("inf")):
        raise wrong
    return price_in, price_out


def register(subparsers) -> None:
    parser = subparsers.add_parser("grade", help="grade trajectories against a rubric",
                                   description="Grade trajectories (.json/.jsonl files, or directories of them) "
                                               "against a rubric, or the (trajectory, rubric) lines of datasets.")
    parser.add_argument("rubric", metavar="RUBRIC", nargs="?")
    parser.add_argument("paths", nargs="*", metavar="TRAJECTORY_OR_DIR")
    parser.add_argument("--dataset", action="append", default=[], metavar="FILE.jsonl",
                        help="grade a dataset instead: each line {\"trajectory\": ..., \"rubric\": ...}, each an "
                             "inline object or a path relative to the file (repeatable); no RUBRIC then")
    parser.add_argument("--allow-outside", action="append", default=[], metavar="PATH",
                        help="with --dataset: also read rubric and trajectory paths inside this folder (repeatable); "
                             "by default a dataset's paths must resolve inside the dataset file's own folder")
    parser.add_argument("--aggregate", choices=AGGREGATES,
                        help="also report aggregate figures: healthbench = HealthBench's clipped mean, bootstrap "
                             "std and per-tag means (table or json format)")
    parser.add_argument("--judge", choices=JUDGES,
                        help="judge for judge items (default: the rubric's judge: panel when it has one, else "
                             "embedded; none reports them as not evaluated)")
    parser.add_argument("--panel-member", action="append", metavar="MEMBER", default=[],
                        help="with --judge panel, once per member: embedded, embedded:METHOD or openai:URL:MODEL")
    parser.add_argument("--panel-combine", choices=COMBINES,
                        help="how a panel combines its members' verdicts (default: the rubric's, else mean_logit)")
    parser.add_argument("--model", help="judge model: a catalog name (rubric model list) or a local HF folder or .gguf "
                                         "(embedded); a model name (openai)")
    parser.add_argument("--method", choices=METHOD_NAMES,
                        help="verdict method for judge items that name none (default: the judge model's own)")
    parser.add_argument("--quantization", choices=QUANTIZATION_CHOICES,
                        help="embedded judge on the CPU: int8 linear maps, int8-weights (int8 weights times float "
                             "activations) or none (float32 results; a GGUF judge keeps its own blocks, at about the "
                             "file's memory); default: the model's own (int8 for the default judge model, float32 "
                             "for the others; rubric model list)")
    parser.add_argument("--send-key-to-rubric-urls", action="store_true",
                        help="send the API key ($RUBRICS_OPENAI_API_KEY or $OPENAI_API_KEY) to the openai:URL panel "
                             "members a rubric names too (default: only to --base-url's server and members you name)")
    parser.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://localhost:8000/v1 (--judge openai)")
    parser.add_argument("--calibration", metavar="FILE",
                        help="calibration file from `rubric judge-eval --fit-calibration --write`; overrides the "
                             "rubric's judge: calibration; refused when made for another model, layout or method")
    parser.add_argument("--head", metavar="FILE",
                        help="verdict head from `rubric judge-train`, for --method head (and items of method head); "
                             "overrides the rubric's judge: head; refused when trained for another model or layout")
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--output", "-o", metavar="FILE", help="write results here instead of stdout")
    parser.add_argument("--verbose", "-v", action="store_true", help="table: one row per item too")
    parser.add_argument("--uncertain", type=band, metavar="LOW,HIGH",
                        help="judge probabilities in this band (inclusive) mark an item uncertain; overrides the "
                             "rubric's judge: uncertain, not an item's own (default 0.35,0.65)")
    parser.add_argument("--cache", metavar="PATH",
                        help="verdict cache file (default: verdicts.sqlite in $RUBRICS_CACHE or ~/.cache/agent-rubrics)")
    parser.add_argument("--no-cache", action="store_true", help="judge every item again; read and write no cache")
    parser.add_argument("--price-per-mtok", type=prices, metavar="IN,OUT",
                        help="print the judging cost at these prices per million prompt and generated tokens")
    parser.add_argument("--reward", choices=REWARDS, default="hard",
                        help="what the reward field of json/jsonl output holds: hard = score (default), "
                             "expected = expected_score")
    parser.add_argument("--group-by", choices=("task_id",),
                        help="grade the trajectories that share a task_id (and a rubric) as one group of attempts: "
                             "each judge item also judged side by side in pairs, and the attempts ranked "
                             "(a trajectory without a task_id is graded alone)")
    parser.add_argument("--comparisons", type=int, metavar="K",
                        help="with --group-by: other attempts each attempt is compared with on an item, both "
                             "orders (default 2; more costs more judging)")
    parser.add_argument("--reward-json", metavar="PATH",
                        help="also write PATH as {\"reward\": R} (Harbor/Terminal-Bench reward.json) for the one "
                             "trajectory graded; R is null when the result is incomplete or it did not load")
    parser.set_defaults(handler=run, parser=parser)


def warn(message: str) -> None:
    from rubrics.cli.table import printable

    print(printable(message), file=sys.stderr)   # paths and messages can carry terminal escape sequences


def make_judge(args, plan=None):
    """The judge the options ask for over the rubric's judge: section (rubrics.judges.factory.JudgeSpec.from_args),
    with the verdict cache unless --no-cache; a judge that cannot be built grades nothing and says why."""
    from rubrics.judges import UnavailableJudge
    from rubrics.judges.extras import MissingExtraError
    from rubrics.judges.factory import JudgeSpec, build_judge

    try:
        spec = JudgeSpec.from_args(args, plan.rubric if plan is not None else None)
    except ValueError as exc:   # --panel-member without --judge panel; a calibration file that cannot be read
        args.parser.error(str(exc))
    if spec.kind == "panel" and len(spec.members) < 2:
        args.parser.error("--judge panel needs at least two --panel-member (or a rubric with judge: panel)")
    try:
        judge = build_judge(spec)
    except MissingExtraError as exc:
        warn(f"error: {exc}")
        return UnavailableJudge(f"not evaluated: {exc}", name=spec.kind)
    except (ValueError, OSError) as exc:   # a usage error, not a traceback
        if spec.kind == "embedded":   # a refused calibration file, or a --model it cannot identify
            args.parser.error(str(exc))
        if isinstance(exc, ValueError):   # a malformed --base-url, --model or --panel-member
            args.parser.error(f"--judge {spec.kind}: {exc}")
        raise
    if spec.kind in ("embedded", "openai"):
        check_calibrated_methods(args, judge, plan)
    return judge


def check_calibrated_methods(args, judge, plan) -> None:
    """A calibration file with an entry for none of the methods the rubric's judge items use is refused."""
    from rubrics.judges.fitted.calibration_file import CalibrationFileError
    from rubrics.judges.methods import method_name_for

    loaded = getattr(judge, "calibration_file", None)
    if loaded is None or plan is None:
        return
    try:
        loaded.check_methods(method_name_for(step.judge, judge.method) for step in plan.judge_steps)
    except CalibrationFileError as exc:
        args.parser.error(str(exc))


def check_usage(args) -> None:
    if args.judge == "openai" and not args.base_url:
        args.parser.error("--judge openai needs --base-url")
    if args.cache and args.no_cache:
        args.parser.error("--cache and --no-cache exclude each other")
    if args.dataset and args.rubric is not None:
        args.parser.error("--dataset takes the rubric from each line: give no RUBRIC or TRAJECTORY_OR_DIR")
    if args.allow_outside and not args.dataset:
        args.parser.error("--allow-outside applies to the paths in --dataset files: give --dataset FILE.jsonl")
    if not args.dataset and (args.rubric is None or not args.paths):
        args.parser.error("give RUBRIC and at least one TRAJECTORY_OR_DIR, or --dataset FILE.jsonl")
    if args.comparisons is not None and not args.group_by:
        args.parser.error("--comparisons applies to groups of attempts: add --group-by task_id")
    if args.comparisons is not None:
        from rubrics.grading.groups import checked_comparisons
        try:
            checked_comparisons(args.comparisons)
        except ValueError as exc:
            args.parser.error(f"--{exc}")
    if args.aggregate and args.format == "jsonl":
        args.parser.error("--aggregate needs --format table or json (jsonl holds results only)")


def run(args) -> int:
    check_usage(args)
    graded = grade_dataset(args) if args.dataset else grade_paths(args)
    if graded is None:
        return 1
    results, load_errors = graded.results, graded.load_errors
    if not nothing_loaded(graded, args):
        write_results(results, args, aggregate_of(args, graded))
    if args.reward_json:   # one trial's reward for task runners; null unless its result is complete
        from rubrics.integrations.reward_json import reward_json_option
        reward_json_option(args, results, load_errors)
    from rubrics.cli.judge_report import judge_report_lines
    for line in judge_report_lines(results, args.price_per_mtok):
        warn(line)
    incomplete = [r for r in results if not r.complete]
    if incomplete and (args.format != "table" or args.output):   # the table itself says so otherwise
        not_evaluated = sum(1 for r in incomplete for i in r.items if i.status == "error")
        warn(f"incomplete: {len(incomplete)} of {len(results)} scores are incomplete "
             f"({not_evaluated} items not evaluated)")
    if load_errors:
        warn(f"{len(load_errors)} trajectory input(s) could not be loaded; {len(results)} graded")
    return 1 if load_errors or incomplete else 0


@dataclass
class Graded:
    jobs: list       # rubrics.grading.jobs.Job, in result order
    results: list    # rubrics.result.Result
    load_errors: list[str]


def nothing_loaded(graded: Graded, args) -> bool:
    """No input loaded: a table would be a header over no rows beside the errors on stderr, so none is printed (nor
    written to --output). JSON and JSONL still write their empty document: their reader always gets strict JSON."""
    return args.format == "table" and not graded.results and bool(graded.load_errors)


def grade_paths(args) -> Graded | None:
    from pathlib import Path

    from rubrics.rubric.compiler import compile_rubric
    from rubrics.grading.jobs import Job
    from rubrics.rubric.load import analyze_rubric
    from rubrics.trajectory.paths import read_paths
    rubric, problems, source = analyze_rubric(Path(args.rubric))
    for problem in problems:
        if problem.severity == "error":
            warn(problem.format(source))
    if rubric is None:
        return None
    plan = compile_rubric(rubric, args.uncertain)
    trajectories, load_errors = read_paths(args.paths)   # a directory contributes its trajectory files, sorted
    for line in load_errors:
        warn(line)
    judge = make_judge(args, plan) if plan.needs_judge and trajectories else None
    jobs = [Job(plan, t) for t in trajectories]
    from rubrics.cli.judge_progress import judge_progress   # progress bar on a terminal, summary line after
    with judge_progress(judge):
        results = grade(jobs, judge, args)
    return Graded(jobs, results, load_errors)


def grade_dataset(args) -> Graded:
    """Every usable line of every --dataset file, all judge requests in one judge call. The judge comes from the
    options; a rubric's own judge: panel or calibration is used when every rubric of the run has the same."""
    from rubrics.grading.dataset import read_dataset
    from rubrics.grading.jobs import PlanCache
    from rubrics.judges.factory import JudgeSpec

    jobs, load_errors, plans = [], [], PlanCache(limit=1 << 30)
    for name in args.dataset:
        dataset = read_dataset(name, args.uncertain, plans, allow_outside=args.allow_outside)
        jobs += dataset.jobs
        load_errors += dataset.errors
    for line in load_errors:
        warn(line)
    judged = [job.plan for job in jobs if job.plan.needs_judge]
    settings = {JudgeSpec.from_rubric(plan.rubric) for plan in judged}
    if len(settings) > 1 and not args.judge:
        warn("warning: the rubrics of this dataset set different judge: panel or calibration; grading with the "
             "embedded judge (choose with --judge, --panel-member, --calibration)")
    judge = make_judge(args, judged[0] if len(settings) == 1 else None) if judged else None
    from rubrics.cli.judge_progress import judge_progress
    with judge_progress(judge):
        results = grade(jobs, judge, args)
    return Graded(jobs, results, load_errors)


def grade(jobs: list, judge, args) -> list:
    """The jobs' results in job order: each alone, or (--group-by task_id) each task's attempts together."""
    from rubrics.grading.groups import DEFAULT_COMPARISONS, grade_by_task
    from rubrics.grading.scoring import grade_jobs

    judges = lambda plan: judge if plan.needs_judge else None  # noqa: E731
    if args.group_by:
        return grade_by_task(jobs, judges, comparisons=args.comparisons or DEFAULT_COMPARISONS, reward=args.reward)
    return grade_jobs(jobs, judges, reward=args.reward)


def aggregate_of(args, graded: Graded):
    if args.aggregate != "healthbench":
        return None
    from rubrics.healthbench.aggregate import aggregate_results

    return aggregate_results(graded.results, [job.trajectory for job in graded.jobs])


def write_results(results, args, aggregate=None) -> None:
    from rubrics.cli.table import render_aggregate, render_table
    from rubrics.trajectory.json_text import dumps

    # Strict JSON (no NaN), lone surrogates escaped: the whole text is encoded before anything is written,
    # so a value that cannot be written never leaves a truncated or empty --output file behind.
    if args.format == "jsonl":
        text = "".join(dumps(r.to_dict()) + "\n" for r in results)
    elif args.format == "json" and aggregate is not None:
        text = dumps({"results": [r.to_dict() for r in results], "aggregate": aggregate.to_dict()}, indent=2) + "\n"
    elif args.format == "json":
        text = dumps([r.to_dict() for r in results], indent=2) + "\n"
    else:
        text = render_table(results, verbose=args.verbose)
        if aggregate is not None:
            text += render_aggregate(aggregate)
    data = text.encode("utf-8")
    if args.output:
        with open(args.output, "wb") as out:
            out.write(data)
    elif hasattr(sys.stdout, "buffer"):   # bytes: UTF-8 whatever the locale says stdout's encoding is
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(text)
