"""JSON Schemas of task.yaml, calibration.json, split.json and report.json, generated from the pydantic models.

    python -m rubrics.delivery.schema_gen            # writes schemas/{task,calibration,split,delivery_report}.schema.json
    python -m rubrics.delivery.schema_gen --check    # exit 1 when the committed files differ from the models

Written by rubrics.schema_gen's generator (same dialect, formatting and --check), from this package's models.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

from rubrics.schema_gen import DIALECT, generate

BASE_ID = "https://agent-rubrics.dev/schemas/"


def _model_schema(model: type, name: str, mode: str) -> dict:
    schema = model.model_json_schema(mode=mode)
    return {"$schema": DIALECT, "$id": f"{BASE_ID}{name}.schema.json", **schema}


def task_schema() -> dict:
    from rubrics.delivery.tasks.task import TaskSpec

    return _model_schema(TaskSpec, "task", "validation")


def calibration_schema() -> dict:
    from rubrics.delivery.pass_rates.records import CalibrationReport

    return _model_schema(CalibrationReport, "calibration", "serialization")


def split_schema() -> dict:
    from rubrics.delivery.split.heldout import SplitPlan

    return _model_schema(SplitPlan, "split", "serialization")


def delivery_report_schema() -> dict:
    from rubrics.delivery.report.records import DeliveryReport

    return _model_schema(DeliveryReport, "delivery_report", "serialization")


def task_run_result_schema() -> dict:
    from rubrics.delivery.runs.records import RunResult

    return _model_schema(RunResult, "task_run_result", "serialization")


BUILDERS: dict[str, Callable[[], dict]] = {
    "task_run_result": task_run_result_schema,
    "task": task_schema,
    "calibration": calibration_schema,
    "split": split_schema,
    "delivery_report": delivery_report_schema,
}


def main(argv: list[str] | None = None) -> int:
    return generate(BUILDERS, argv, "python -m rubrics.delivery.schema_gen", __doc__.split("\n")[0])


if __name__ == "__main__":
    sys.exit(main())
