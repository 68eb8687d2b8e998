"""`rubric schema rubric|trajectory|result`: print the JSON Schema generated from the models."""
from __future__ import annotations

SCHEMA_NAMES = ("rubric", "trajectory", "result")


def register(subparsers) -> None:
    parser = subparsers.add_parser("schema", help="print a JSON Schema (rubric, trajectory or result)")
    parser.add_argument("name", choices=SCHEMA_NAMES)
    parser.set_defaults(handler=run)


def run(args) -> int:
    from rubrics.schema_gen import build_schema, dumps

    print(dumps(build_schema(args.name)), end="")
    return 0
