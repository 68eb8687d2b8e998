"""`rubric split DIR --heldout 0.2 --seed S`: a reproducible held-out split that keeps groups and near twins together."""
from __future__ import annotations


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "split", help="propose a held-out split by groups",
        description="Split the tasks of DIR into training and held-out sets. A group is the tasks sharing a "
                    "metadata.group label, joined with tasks whose instructions are near twins (Jaccard "
                    "similarity of character 5-grams >= --threshold); no group straddles the split. Writes "
                    "split.json; with --materialize OUT, also copies the task folders into OUT/tasks/ and "
                    "OUT/heldout/. The input folder is never changed apart from split.json.")
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("--heldout", type=float, default=0.2, help="share of tasks to hold out (default 0.2)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--threshold", type=float, default=None, help="near-twin Jaccard threshold (default 0.7)")
    parser.add_argument("--output", "-o", default=None, help="where to write the plan (default DIR/split.json)")
    parser.add_argument("--materialize", metavar="OUT", default=None,
                        help="copy task folders into OUT/tasks/ and OUT/heldout/ (OUT must be new or empty)")
    parser.set_defaults(handler=run)


def run(args) -> int:
    import sys
    from pathlib import Path

    from rubrics.delivery.tasks.catalog import load_catalog
    from rubrics.delivery.split.near_duplicates import DEFAULT_THRESHOLD
    from rubrics.delivery.split.heldout import SPLIT_FILE, materialize, plan_split, write_plan

    root = Path(args.dir)
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    delivery, specs, problems = load_catalog(root)
    if problems:
        # A task without a readable instruction cannot be checked for twins: splitting around it could leak.
        for problem in problems:
            print(problem.format_at_path(), file=sys.stderr)
        print("split refused: fix task.yaml first (rubric tasks check)", file=sys.stderr)
        return 1
    try:
        threshold = args.threshold if args.threshold is not None else DEFAULT_THRESHOLD
        plan = plan_split(specs, args.heldout, args.seed, threshold)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    output = Path(args.output) if args.output else root / SPLIT_FILE
    write_plan(plan, output)
    print(f"{len(plan.tasks)} for training, {len(plan.heldout)} held out (target {plan.target_heldout}); "
          f"{len(plan.groups)} groups, {len(plan.near_duplicates)} near-twin pair(s)")
    for category, counts in plan.by_category.items():
        print(f"  {category}: {counts.tasks} for training, {counts.heldout} held out "
              f"(of {counts.tasks + counts.heldout})")
    print(f"wrote {output}", file=sys.stderr)
    if args.materialize:
        try:
            materialize(plan, root, delivery, Path(args.materialize))
        except (FileExistsError, ValueError) as exc:
            print(str(exc), file=sys.stderr)
            return 1
        print(f"copied task folders into {args.materialize}/tasks and {args.materialize}/heldout", file=sys.stderr)
    return 0
