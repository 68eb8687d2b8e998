"""A copy of the installable package in a folder, for tests that install it or hook it up as a fresh user would
(so that no build/ or *.egg-info lands in the working tree)."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE_FILES = ["pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "rubrics", "judge_engine"]


def copy_package(destination: Path) -> Path:
    """Copies the package's files (no caches, no build metadata) into ``destination``; returns it."""
    destination.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in PACKAGE_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=ignore)
        else:
            shutil.copy2(source, destination / name)
    return destination
