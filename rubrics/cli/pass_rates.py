"""`rubric pass-rates DIR --results RESULTS.jsonl`: per-task pass rates, pass@k, labels and flags.

`rubric calibrate` is its old name (kept working by rubrics/cli/main.py's RENAMED_COMMANDS): "calibration" is the
judge's word for its probability fit, so the delivery says "pass rates" for how often a model solves each task.
"""
from __future__ import annotations

COMMAND = "pass-rates"
HELP = "label tasks keep/drop/inspect from graded attempts"
DESCRIPTION = ("Read graded attempts (the output of `rubric grade --format jsonl`) and, per task of DIR, "
               "report attempts, successes, pass rate, score mean and spread, pass@1, pass@k and pass^k, "
               "and the label: inspect at 0%, drop at 100%, keep in between. Flags flaky tasks (one "
               "attempt graded twice differently, or a failing reference run: a trajectory id ending in "
               "'reference') and tasks with fewer attempts than asked. Writes pass_rates.json.")


def register(subparsers) -> None:
    parser = subparsers.add_parser(COMMAND, help=HELP, description=DESCRIPTION)
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("--results", required=True, metavar="RESULTS.jsonl")
    parser.add_argument("--attempts", type=int, default=16, help="attempts asked per task (default 16)")
    parser.add_argument("--pass-threshold", type=float, default=1.0,
                        help="an attempt succeeds when its score is at least this (default 1.0)")
    parser.add_argument("--k", type=int, default=None, help="k of pass@k and pass^k (default: attempts // 2)")
    parser.add_argument("--output", "-o", default=None, help="where to write the JSON (default DIR/pass_rates.json)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="what to print (default table)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import sys
    from pathlib import Path

    from rubrics.delivery.pass_rates.label_tasks import label_tasks
    from rubrics.delivery.tasks.catalog import load_catalog
    from rubrics.delivery.runs.graded_results import read_results
    from rubrics.delivery.report.files import PASS_RATES_FILE

    root, results_path = Path(args.dir), Path(args.results)
    for path, what in ((root, "not a directory"), (results_path, "no such file")):
        if not (path.is_dir() if path is root else path.is_file()):
            print(f"{path}: {what}", file=sys.stderr)
            return 2
    if not 0.0 <= args.pass_threshold <= 1.0:
        print(f"--pass-threshold must be in [0, 1], got {args.pass_threshold}", file=sys.stderr)
        return 2
    delivery, specs, problems = load_catalog(root)
    for problem in problems:   # a broken task.yaml costs the task its category, not its pass rate
        print(problem.format_at_path(), file=sys.stderr)
    categories = {ref.id: (specs[ref.id].metadata.category if ref.id in specs else None) for ref in delivery.all_tasks()}
    results = read_results(results_path, args.results)
    try:
        rates = label_tasks(results, categories, attempts_requested=args.attempts, k=args.k,
                            pass_threshold=args.pass_threshold, results_name=results_path.name)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    output = Path(args.output) if args.output else root / PASS_RATES_FILE
    text = rates.model_dump_json(indent=2) + "\n"
    output.write_text(text, encoding="utf-8")
    for line in rates.problems:
        print(line, file=sys.stderr)
    for task_id in rates.unknown_tasks:
        print(f"{args.results}: results for {task_id!r}, which is not a task folder of {root}", file=sys.stderr)
    print(text if args.format == "json" else _table(rates), end="")
    print(f"wrote {output}", file=sys.stderr)
    return 0


def _table(rates) -> str:
    from rubrics.cli.table import align

    k = rates.k
    header = ["task", "category", "passed", "rate", "mean", "sd", "pass@1", f"pass@{k}", f"pass^{k}", "label", "flags"]
    rows = [header]
    for t in rates.tasks:
        rows.append([t.task_id, t.category or "-", f"{t.successes}/{t.attempts}", _pct(t.pass_rate),
                     _num(t.score_mean), _num(t.score_std), _num(t.pass_at_1), _num(t.pass_at_k),
                     _num(t.pass_hat_k), t.label, ",".join(f.code for f in t.flags) or "-"])
    lines = align(rows)
    s = rates.summary
    lines.append(f"{len(rates.tasks)} tasks: {s.keep} keep, {s.drop} drop, {s.inspect} inspect; "
                 f"{s.flaky} flaky, {s.too_few_attempts} with fewer than {rates.attempts_requested} attempts")
    return "\n".join(lines) + "\n"


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value) -> str:
    return "-" if value is None else f"{value:.3f}"
