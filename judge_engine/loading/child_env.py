"""The environment of a child interpreter that must import this judge_engine: the loaders hand one-off work to
one (the GGUF tokenizer's conversion, the int8 cache's build) so that its memory leaves with it."""

from __future__ import annotations

import os
from pathlib import Path


def child_env() -> dict[str, str]:
    """This process's environment, with the folder holding this judge_engine first on PYTHONPATH (however the
    parent found it: installed, a source checkout, a path added at run time)."""
    package_root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
