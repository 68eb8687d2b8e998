"""`rubric report DIR`: report.md, report.json and pass-rates.svg from the delivery, pass_rates.json and split.json."""
from __future__ import annotations

import argparse


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="write report.md, report.json and the pass-rate chart",
        description="Write report.md (category mix, baseline pass@1 per category, keep/drop/inspect table, "
                    "removed tasks with reasons, split summary), report.json (the same numbers) and "
                    "pass-rates.svg, from the task folders of DIR, DIR/pass_rates.json and DIR/split.json.")
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("--pass-rates", default=None, metavar="PASS_RATES.json",
                        help="the output of `rubric pass-rates` (default DIR/pass_rates.json)")
    parser.add_argument("--calibration", dest="old_pass_rates", default=None, help=argparse.SUPPRESS)   # its old name
    parser.add_argument("--split", default=None, help="split.json (default DIR/split.json)")
    parser.add_argument("--output-dir", default=None, help="where to write (default DIR)")
    parser.add_argument("--baseline", metavar="RESULTS", default=None,
                        help="with --candidate: write uplift.md, uplift.json and uplift.svg instead, comparing the two "
                             "result files on the held-out split (removed tasks excluded)")
    parser.add_argument("--candidate", metavar="RESULTS", default=None, help="the trained model's results")
    parser.add_argument("--k", type=int, default=None,
                        help="k of pass@k and pass^k in the uplift (default: the pass rates')")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import sys
    from pathlib import Path

    from pydantic import ValidationError

    from rubrics.delivery.report.files import pass_rates_file, write_report
    from rubrics.delivery.split.heldout import SPLIT_FILE

    root = Path(args.dir)
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    if args.old_pass_rates:
        print("warning: --calibration is deprecated; use --pass-rates", file=sys.stderr)
        args.pass_rates = args.pass_rates or args.old_pass_rates
    if args.pass_rates:
        pass_rates = Path(args.pass_rates)
    else:
        pass_rates, notice = pass_rates_file(root)   # an older DIR/calibration.json, with a notice, where only that
        if notice:
            print(notice, file=sys.stderr)
    split = Path(args.split) if args.split else root / SPLIT_FILE
    for given, path in ((args.pass_rates, pass_rates), (args.split, split)):
        if given and not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
    out_dir = Path(args.output_dir) if args.output_dir else root
    if args.baseline or args.candidate:
        return _uplift(args, root, pass_rates, split, out_dir)
    try:
        report, problems = write_report(root, out_dir, pass_rates, split)
    except (ValidationError, ValueError) as exc:
        print(f"cannot read pass rates or split: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(problem.format_at_path(), file=sys.stderr)
    for path, what, command in ((pass_rates, "pass rates", "rubric pass-rates"), (split, "split", "rubric split")):
        if not path.is_file():
            print(f"note: no {what} yet; run `{command}` for that section", file=sys.stderr)
    print(f"wrote {out_dir / 'report.md'}, {out_dir / 'report.json'}" + (f", {out_dir / report.chart}" if report.chart else ""))
    return 1 if problems else 0


def _uplift(args, root, pass_rates_path, split, out_dir) -> int:
    import sys
    from pathlib import Path

    from rubrics.delivery.runs.graded_results import read_results
    from rubrics.delivery.report.build import removed_tasks
    from rubrics.delivery.report.files import read_inputs
    from rubrics.delivery.report.uplift import build_uplift
    from rubrics.delivery.report.uplift_render import UPLIFT_JSON, UPLIFT_MD, UPLIFT_SVG, uplift_markdown, uplift_svg

    if not (args.baseline and args.candidate):
        print("--baseline and --candidate go together", file=sys.stderr)
        return 2
    paths = [Path(args.baseline), Path(args.candidate)]
    for path in paths:
        if not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
    if not split.is_file():
        print(f"{split}: no split; run `rubric split` first (the uplift is measured on the held-out side)",
              file=sys.stderr)
        return 2
    inputs, problems = read_inputs(root, pass_rates_path, split)
    for problem in problems:
        print(problem.format_at_path(), file=sys.stderr)
    k = args.k or (inputs.pass_rates.k if inputs.pass_rates else 1)
    threshold = inputs.pass_rates.pass_threshold if inputs.pass_rates else 1.0
    categories = {t: s.metadata.category for t, s in inputs.specs.items()}
    results = [read_results(p) for p in paths]
    for r in results:
        for line in r.problems:
            print(line, file=sys.stderr)
    report = build_uplift(results[0], results[1], categories, inputs.plan.heldout,
                          {r.task_id for r in removed_tasks(inputs)}, k=k, threshold=threshold,
                          names=(paths[0].name, paths[1].name))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / UPLIFT_MD).write_text(uplift_markdown(report), encoding="utf-8")
    (out_dir / UPLIFT_JSON).write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out_dir / UPLIFT_SVG).write_text(uplift_svg(report), encoding="utf-8")
    print(f"wrote {out_dir / UPLIFT_MD}, {out_dir / UPLIFT_JSON}, {out_dir / UPLIFT_SVG}")
    return 0
