"""JSON Schemas of task.yaml, calibration.json, split.json and report.json, generated from the pydantic models.

    python -m rubrics.delivery.schema_gen            # writes schemas/{task,calibration,split,delivery_report}.schema.json
    python -m rubrics.delivery.schema_gen --check    # exit 1 when the committed files differ from the models

Kept beside rubrics.schema_gen (same dialect, same formatting) because that generator has a fixed
list of names; fold these in if it grows a registry.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from rubrics.schema_gen import DIALECT, SCHEMA_DIR, dumps

BASE_ID = "https://agent-rubrics.dev/schemas/"


def _model_schema(model: type, name: str, mode: str) -> dict:
    schema = model.model_json_schema(mode=mode)
    return {"$schema": DIALECT, "$id": f"{BASE_ID}{name}.schema.json", **schema}


def task_schema() -> dict:
    from rubrics.delivery.task import TaskSpec

    return _model_schema(TaskSpec, "task", "validation")


def calibration_schema() -> dict:
    from rubrics.delivery.calibration_model import CalibrationReport

    return _model_schema(CalibrationReport, "calibration", "serialization")


def split_schema() -> dict:
    from rubrics.delivery.split import SplitPlan

    return _model_schema(SplitPlan, "split", "serialization")


def delivery_report_schema() -> dict:
    from rubrics.delivery.report_model import DeliveryReport

    return _model_schema(DeliveryReport, "delivery_report", "serialization")


BUILDERS: dict[str, Callable[[], dict]] = {
    "task": task_schema,
    "calibration": calibration_schema,
    "split": split_schema,
    "delivery_report": delivery_report_schema,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rubrics.delivery.schema_gen", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=SCHEMA_DIR, help=f"output folder (default: {SCHEMA_DIR})")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args(argv)
    stale = []
    for name, build in BUILDERS.items():
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
        print(f"{path} differs from the models; run python -m rubrics.delivery.schema_gen", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
