"""removal.yaml in a task folder: a person's reasons to remove the task, which numbers cannot show.

    reasons:
      - kind: hackable            # ambiguous | hackable | leaks-solution | other
        note: the tests only check the return type; returning [] passes
        by: sara.m
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rubrics.rubric.problems import Problem

REMOVAL_FILE = "removal.yaml"


class ManualReason(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["ambiguous", "hackable", "leaks-solution", "other"]
    note: str = Field(min_length=1, description="What a reviewer saw.")
    by: str | None = Field(None, description="Who decided.")

    def format(self) -> str:
        return f"{self.kind}" + (f" ({self.by})" if self.by else "") + f": {self.note}"


class ManualRemoval(BaseModel):
    model_config = ConfigDict(extra="forbid", title="Removal")

    reasons: list[ManualReason] = Field(min_length=1)


def read_removal(folder: Path, shown: str) -> tuple[list[ManualReason], list[Problem]]:
    path = folder / REMOVAL_FILE
    if not path.is_file():
        return [], []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return ManualRemoval.model_validate(data).reasons, []
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        return [], [Problem.about(shown, f"unreadable: {exc}", "removal-invalid")]
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(document)"
        return [], [Problem.about(shown, f"{field}: {first['msg']}", "removal-invalid")]
