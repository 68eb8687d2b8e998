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


# the trust lifecycle's package and the judges' regrouping: every module that moved, by its old path
TRUST_AND_JUDGES = {
    "rubrics.judge_eval": "rubrics.trust",
    **{f"rubrics.judge_eval.{name}": f"rubrics.trust.{name}"
       for name in ("cross_validation", "head_training", "labels", "metrics", "rendering", "split")},
    "rubrics.judges.quality": "rubrics.trust.quality",
    "rubrics.view.judge_eval_export": "rubrics.trust.export",
    **{f"rubrics.judges.{name}": f"rubrics.judges.fitted.{name}"
       for name in ("fitted_file", "calibration_file", "verdict_head", "logistic", "judge_models")},
    **{f"rubrics.judges.{name}": f"rubrics.judges.backends.{name}"
       for name in ("embedded", "openai", "openai_http", "none")},
    **{f"rubrics.judges.{name}": f"rubrics.judges.cache.{name}" for name in ("verdict_cache", "cached")},
}


@pytest.mark.parametrize("old", sorted(TRUST_AND_JUDGES))
def test_each_module_the_trust_package_and_the_judges_regrouping_moved_is_kept(old):
    assert MOVED[old] == TRUST_AND_JUDGES[old]
    for name in [name for name in sys.modules if name == old or name.startswith(old + ".")]:
        sys.modules.pop(name)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {TRUST_AND_JUDGES[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(TRUST_AND_JUDGES[old])


def test_a_module_under_a_moved_package_is_the_new_one_not_a_second_copy():
    for name in [name for name in sys.modules if name.startswith("rubrics.judge_eval")]:
        sys.modules.pop(name)
    with pytest.warns(DeprecationWarning):
        from rubrics.judge_eval import load_labels
        from rubrics.judge_eval.labels import Judged
        from rubrics.judges.embedded import EmbeddedJudge
    from rubrics.judges.backends.embedded import EmbeddedJudge as new_embedded
    from rubrics.trust import load_labels as new_load_labels
    from rubrics.trust.labels import Judged as new_judged
    assert (load_labels, Judged, EmbeddedJudge) == (new_load_labels, new_judged, new_embedded)
