"""JSON Schemas of the rubric, trajectory and result files and of a delivery's files, generated from the pydantic models.

    python -m rubrics.schema_gen            # writes schemas/*.schema.json
    python -m rubrics.schema_gen --check    # exit 1 when the committed files differ from the models

The delivery's: task.yaml (task), the lines of `rubric tasks run` (task_run_result), pass_rates.json
(pass_rates; also written as calibration, its deprecated old name), split.json (split) and report.json
(delivery_report).

An item's check keys are open, so the item schema is assembled here: the item fields, one property
per built-in check key (its config model's schema), `additionalProperties: false`, and a `oneOf`
that requires exactly one check key. Custom check keys from entry points are not in the committed
schema: it describes what every installation accepts.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic.json_schema import GenerateJsonSchema, models_json_schema

DIALECT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://agent-rubrics.dev/schemas/"
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
COMBINATORS = {"all_of": "list", "any_of": "list", "not": "one"}


def _builtin_checks() -> dict[str, type]:
    from rubrics.checks.registry import _BUILTINS, get_check
    return {key: get_check(key).config_model for key in _BUILTINS}


def _check_schema(key: str, config_refs: dict[str, dict]) -> dict:
    if COMBINATORS.get(key) == "list":
        return {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Check"},
                "description": f"{key}: a list of check mappings such as {{contains: {{...}}}}"}
    if COMBINATORS.get(key) == "one":
        return {"$ref": "#/$defs/Check", "description": "not: one check mapping"}
    return config_refs[key]


def rubric_schema() -> dict:
    from rubrics.rubric.spec import ItemFields, JudgeOptions, RubricHeader

    checks = _builtin_checks()
    models = [RubricHeader, ItemFields, JudgeOptions] + [m for k, m in checks.items() if k not in COMBINATORS]
    refs, top = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    defs = top["$defs"]
    config_refs = {k: refs[(m, "validation")] for k, m in checks.items() if k not in COMBINATORS}
    check_props = {key: _check_schema(key, config_refs) for key in checks}
    judge_prop = {"anyOf": [{"type": "string", "minLength": 1}, refs[(JudgeOptions, "validation")]],
                  "description": "judge: the criterion text, or {text, method, mode, max_tokens, threshold, uncertain}"}
    item_defs = defs.pop(refs[(ItemFields, "validation")]["$ref"].rsplit("/", 1)[1])
    one_check = [{"required": [key]} for key in ["judge", *checks]]
    base = {k: v for k, v in item_defs["properties"].items() if k != "points"}
    points = item_defs["properties"]["points"]
    defs["Gate"] = {"type": "object", "title": "Gate", "description": "Must be met, else the score is 0.",
                    "properties": {**base, "judge": judge_prop, **check_props}, "required": ["id"],
                    "additionalProperties": False, "oneOf": one_check}
    defs["Criterion"] = {"type": "object", "title": "Criterion", "description": "Earns its points when met.",
                         "properties": {**base, "points": {**points, "type": "integer", "not": {"const": 0}},
                                        "judge": judge_prop, **check_props},
                         "required": ["id", "points"], "additionalProperties": False, "oneOf": one_check}
    defs["Check"] = {"type": "object", "description": "One check mapping, e.g. {contains: {text: ...}}.",
                     "properties": check_props, "additionalProperties": False, "minProperties": 1,
                     "maxProperties": 1}
    header = defs.pop(refs[(RubricHeader, "validation")]["$ref"].rsplit("/", 1)[1])
    header["properties"]["gates"]["items"] = {"$ref": "#/$defs/Gate"}
    header["properties"]["criteria"]["items"] = {"$ref": "#/$defs/Criterion"}
    for points_free in (defs["Gate"],):
        points_free["properties"].pop("points", None)
    return {"$schema": DIALECT, "$id": "https://agent-rubrics.dev/schemas/rubric.schema.json",
            **header, "title": "Rubric", "$defs": dict(sorted(defs.items()))}


def trajectory_schema() -> dict:
    from rubrics.trajectory import Trajectory

    schema = Trajectory.model_json_schema(by_alias=True, mode="validation")
    schema["properties"].pop("source", None)   # set by the loader, never read from the file
    return {"$schema": DIALECT, "$id": "https://agent-rubrics.dev/schemas/trajectory.schema.json", **schema}


def result_schema() -> dict:
    from rubrics.result import Result

    schema = Result.model_json_schema(mode="serialization")
    return {"$schema": DIALECT, "$id": "https://agent-rubrics.dev/schemas/result.schema.json", **schema}


def _model_schema(model: type, name: str, mode: str, renamed: tuple[type, ...] = (),
                  published_names: dict[str, str] | None = None) -> dict:
    """`renamed`: nested models whose class was renamed after the schema was published; each keeps its published
    name, the title its model_config gives, as its $defs key. `published_names`: the same by class name -> name."""
    published = {m.__name__: m.model_config["title"] for m in renamed} | (published_names or {})

    class PublishedNames(GenerateJsonSchema):
        def normalize_name(self, name: str) -> str:
            return super().normalize_name(published.get(name, name))

    schema = model.model_json_schema(mode=mode, schema_generator=PublishedNames)
    return {"$schema": DIALECT, "$id": f"{BASE_ID}{name}.schema.json", **schema}


def task_schema() -> dict:
    from rubrics.delivery.tasks.task import TaskSpec

    return _model_schema(TaskSpec, "task", "validation")


def pass_rates_schema() -> dict:
    from rubrics.delivery.pass_rates.records import PassRates

    return _model_schema(PassRates, "pass_rates", "serialization")


def old_pass_rates_schema() -> dict:
    """calibration.schema.json: the same schema under its published names (calibration.json, `rubric calibrate`),
    for what still points at it or into its $defs."""
    from rubrics.delivery.pass_rates.records import PassRates

    schema = _model_schema(PassRates, "calibration", "serialization",
                           published_names={"TaskPassRate": "TaskCalibration"})
    return {**schema, "title": "Calibration", "deprecated": True,
            "description": "Deprecated: the old name of pass_rates.schema.json, as calibration.json is of "
                           "pass_rates.json; the same schema."}


def split_schema() -> dict:
    from rubrics.delivery.split.heldout import SplitPlan

    return _model_schema(SplitPlan, "split", "serialization")


def delivery_report_schema() -> dict:
    from rubrics.delivery.report.records import DeliveryReport, PassRateSettings

    return _model_schema(DeliveryReport, "delivery_report", "serialization", renamed=(PassRateSettings,))


def task_run_result_schema() -> dict:
    from rubrics.delivery.runs.records import RunResult

    return _model_schema(RunResult, "task_run_result", "serialization")


# File name (without .schema.json) -> builder; `python -m rubrics.schema_gen` writes them in this order.
BUILDERS: dict[str, Callable[[], dict]] = {
    "rubric": rubric_schema,
    "trajectory": trajectory_schema,
    "result": result_schema,
    "task_run_result": task_run_result_schema,
    "task": task_schema,
    "pass_rates": pass_rates_schema,
    "calibration": old_pass_rates_schema,   # deprecated
    "split": split_schema,
    "delivery_report": delivery_report_schema,
}
NAMES = tuple(BUILDERS)


def build_schema(name: str) -> dict:
    return BUILDERS[name]()


def dumps(schema: dict) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def generate(builders: dict[str, Callable[[], dict]], argv: list[str] | None, prog: str, doc: str) -> int:
    """Write each `<name>.schema.json` (or, with --check, exit 1 when a committed file differs from the models)."""
    parser = argparse.ArgumentParser(prog=prog, description=doc)
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help=f"output folder (default: {SCHEMA_DIR})")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args(argv)
    stale = []
    for name, build in builders.items():
        path = args.out / f"{name}.schema.json"
        text = dumps(build())
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    for path in stale:
        print(f"{path} differs from the models; run {prog}", file=sys.stderr)
    return 1 if stale else 0


def main(argv: list[str] | None = None) -> int:
    return generate(BUILDERS, argv, "python -m rubrics.schema_gen", __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
