"""`rubric import healthbench FILE.jsonl OUTDIR`: a benchmark's examples as rubrics, trajectories and a dataset
file for `rubric grade --dataset`.

Exit status: 0 when every row was imported; 1 when a row could not be (each reported as file:line: error: ...,
the others still written); 2 for usage errors.
"""
from __future__ import annotations

import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser("import", help="turn a benchmark's examples into rubrics and trajectories",
                                   description="Turn a benchmark's examples into rubrics, trajectories and a "
                                               "dataset file for `rubric grade --dataset`.")
    kinds = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    healthbench = kinds.add_parser("healthbench", help="HealthBench rows (prompt, rubrics, example_tags, prompt_id)",
                                   description="Each HealthBench row becomes a rubric (its criteria with points and "
                                               "tags) and a trajectory (the conversation and the completion).")
    healthbench.add_argument("source", metavar="FILE.jsonl")
    healthbench.add_argument("outdir", metavar="OUTDIR")
    healthbench.add_argument("--completions", metavar="FILE.jsonl",
                             help="completions to grade: lines of {prompt_id, completion} (text or messages)")
    healthbench.add_argument("--completion-column", default="completion", metavar="NAME",
                             help="the row's field that holds the completion, dotted for nested fields "
                                  "(default: completion; e.g. ideal_completions_data.ideal_completion)")
    healthbench.set_defaults(handler=run_healthbench, parser=healthbench)


def run_healthbench(args) -> int:
    from pathlib import Path

    from rubrics.cli.table import printable
    from rubrics.healthbench.convert import import_healthbench, write_examples

    source = Path(args.source)
    if not source.is_file():
        args.parser.error(f"{source}: no such file")
    completions = Path(args.completions) if args.completions else None
    if completions is not None and not completions.is_file():
        args.parser.error(f"--completions {completions}: no such file")
    report = import_healthbench(source, completions, args.completion_column)
    for line in report.errors:
        print(printable(line), file=sys.stderr)
    dataset = write_examples(report.examples, Path(args.outdir))
    print(f"imported {len(report.examples)} example(s) into {printable(args.outdir)}"
          + (f"; {len(report.errors)} row(s) could not be imported" if report.errors else "")
          + f"\ngrade them with: rubric grade --dataset {printable(str(dataset))} --aggregate healthbench")
    return 1 if report.errors else 0
