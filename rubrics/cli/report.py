"""`rubric report DIR`: report.md, report.json and pass-rates.svg from the delivery, calibration.json and split.json."""
from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="write report.md, report.json and the pass-rate chart",
        description="Write report.md (category mix, baseline pass@1 per category, keep/drop/inspect table, "
                    "removed tasks with reasons, split summary), report.json (the same numbers) and "
                    "pass-rates.svg, from the task folders of DIR, DIR/calibration.json and DIR/split.json.")
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("--calibration", default=None, help="calibration.json (default DIR/calibration.json)")
    parser.add_argument("--split", default=None, help="split.json (default DIR/split.json)")
    parser.add_argument("--output-dir", default=None, help="where to write (default DIR)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import sys
    from pathlib import Path

    from pydantic import ValidationError

    from rubrics.delivery.report_files import CALIBRATION_FILE, write_report
    from rubrics.delivery.split import SPLIT_FILE

    root = Path(args.dir)
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    calibration = Path(args.calibration) if args.calibration else root / CALIBRATION_FILE
    split = Path(args.split) if args.split else root / SPLIT_FILE
    for given, path in ((args.calibration, calibration), (args.split, split)):
        if given and not path.is_file():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
    out_dir = Path(args.output_dir) if args.output_dir else root
    try:
        report, problems = write_report(root, out_dir, calibration, split)
    except (ValidationError, ValueError) as exc:
        print(f"cannot read calibration or split: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(problem.format(), file=sys.stderr)
    for path, what, command in ((calibration, "calibration", "rubric calibrate"), (split, "split", "rubric split")):
        if not path.is_file():
            print(f"note: no {what} yet; run `{command}` for that section", file=sys.stderr)
    print(f"wrote {out_dir / 'report.md'}, {out_dir / 'report.json'}" + (f", {out_dir / report.chart}" if report.chart else ""))
    return 1 if problems else 0
