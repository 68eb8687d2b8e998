"""Module paths that earlier docs showed users keep working after the move, as the same module, with a warning."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from rubrics.moved_modules import MOVED

REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module_and_warns(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_the_names_the_old_docs_showed_are_there():
    for old in MOVED:
        sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning):
        from rubrics.calibration import pass_at_k
        from rubrics.delivery.intervals import bootstrap_difference
        from rubrics.judges.prompts import PROMPT_LAYOUT_VERSION, SPECIAL_TOKEN_PATTERN
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert callable(bootstrap_difference) and PROMPT_LAYOUT_VERSION and SPECIAL_TOKEN_PATTERN.search("<|im_end|>")


def test_python_dash_m_of_an_old_generator_path_runs_the_generator():
    done = subprocess.run([sys.executable, "-m", "rubrics.delivery.schema_gen", "--check"], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    unknown = subprocess.run([sys.executable, "-c", "import rubrics.calibrations"], cwd=REPO, capture_output=True,
                             text=True)
    assert "ModuleNotFoundError" in unknown.stderr   # only the listed paths are aliased
