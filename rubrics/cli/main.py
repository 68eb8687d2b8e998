"""Entry point of the `rubric` command.

Each name in COMMAND_MODULES is a module rubrics.cli.<name> with `register(subparsers)`, which adds its
subcommand and sets `handler` (args -> exit code) as a default. Adding a command is appending its
name here. Command modules must import only argparse-level things at the top: whatever a command
needs is imported inside its handler, so `rubric lint` never pays for torch.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = ["grade", "lint", "schema", "tasks", "pass_rates", "split", "report", "judge_eval", "judge_train",
                   "model", "serve", "importer", "view"]
# A renamed command keeps working under its old name, after a notice, and is listed nowhere: {old name: (new name,
# what the notice adds)}. `calibrate` was the delivery's task pass rates, which collided with the judge's own
# "calibration" (its probability fit).
RENAMED_COMMANDS = {
    "calibrate": ("pass-rates", "the same options; it writes pass_rates.json, formerly calibration.json"),
}


def build_parser() -> argparse.ArgumentParser:
    from rubrics import __version__

    parser = argparse.ArgumentParser(prog="rubric", description="Grade agent trajectories against YAML rubrics.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"rubrics.cli.{name}").register(subparsers)
    return parser


def current_name(argv: list[str]) -> list[str]:
    """argv with a renamed command's old name replaced by its new one (after a notice on stderr)."""
    if argv and argv[0] in RENAMED_COMMANDS:
        old, (new, said) = argv[0], RENAMED_COMMANDS[argv[0]]
        print(f"warning: `rubric {old}` is deprecated; use `rubric {new}` ({said})", file=sys.stderr)
        return [new, *argv[1:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(current_name(list(sys.argv[1:] if argv is None else argv)))
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:   # `rubric grade ... | head`: stop quietly, like other Unix tools
        sys.stderr.close()
        return 1


if __name__ == "__main__":
    sys.exit(main())
