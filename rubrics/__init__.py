"""agent-rubrics: grade AI-agent trajectories against declarative YAML rubrics.

Every public name is imported on first use, so `import rubrics` (and the `rubric` CLI) stays light:
the judges that need torch or httpx are loaded only when asked for.
"""
from __future__ import annotations

from rubrics import moved_modules as _moved_modules
from rubrics.version import __version__  # noqa: F401 - rubrics.__version__

_moved_modules.install()   # module paths of earlier docs (rubrics.calibration, ...) keep working

_EXPORTS = {
    "load_rubric": ("rubrics.rubric.load", "load_rubric"),
    "load_trajectory": ("rubrics.trajectory", "load_trajectory"),
    "score": ("rubrics.grading.scoring", "score"),
    "score_many": ("rubrics.grading.scoring", "score_many"),
    "score_group": ("rubrics.grading.groups", "score_group"),
    "score_groups": ("rubrics.grading.groups", "score_groups"),
    "ascore": ("rubrics.grading.async_scoring", "ascore"),
    "ascore_many": ("rubrics.grading.async_scoring", "ascore_many"),
    "Pair": ("rubrics.grading.jobs", "Pair"),
    "JudgeBatcher": ("rubrics.grading.batching", "JudgeBatcher"),
    "compile_rubric": ("rubrics.rubric.compiler", "compile_rubric"),
    "Rubric": ("rubrics.rubric.spec", "Rubric"),
    "Item": ("rubrics.rubric.spec", "Item"),
    "Trajectory": ("rubrics.trajectory", "Trajectory"),
    "Result": ("rubrics.result", "Result"),
    "ItemResult": ("rubrics.result", "ItemResult"),
    "RubricError": ("rubrics.rubric.problems", "RubricError"),
    "Problem": ("rubrics.rubric.problems", "Problem"),
    "Judge": ("rubrics.judges.protocol", "Judge"),
    "JudgeRequest": ("rubrics.judges.protocol", "JudgeRequest"),
    "JudgeContext": ("rubrics.judges.protocol", "JudgeContext"),
    "JudgeItem": ("rubrics.judges.protocol", "JudgeItem"),
    "ComparisonRequest": ("rubrics.judges.protocol", "ComparisonRequest"),
    "PairContext": ("rubrics.judges.protocol", "PairContext"),
    "GroupPlace": ("rubrics.result", "GroupPlace"),
    "Calibration": ("rubrics.judges.methods", "Calibration"),
    "Verdict": ("rubrics.judges.protocol", "Verdict"),
    "NoJudge": ("rubrics.judges.backends.none", "NoJudge"),
    "PanelJudge": ("rubrics.judges.panel.judge", "PanelJudge"),
    "PanelMember": ("rubrics.judges.panel.judge", "PanelMember"),
    "CachedJudge": ("rubrics.judges.cache.cached", "CachedJudge"),
    "VerdictCache": ("rubrics.judges.cache.verdict_cache", "VerdictCache"),
    "JudgeUsage": ("rubrics.judges.usage", "JudgeUsage"),
    "MissingExtraError": ("rubrics.judges.extras", "MissingExtraError"),
}
_JUDGES = {"EmbeddedJudge": "backends.embedded", "OpenAIJudge": "backends.openai"}

__all__ = sorted([*_EXPORTS, *_JUDGES])


def __getattr__(name: str):
    import importlib

    if name in _EXPORTS:
        module, attr = _EXPORTS[name]
        value = getattr(importlib.import_module(module), attr)
    elif name in _JUDGES:
        from rubrics.judges.extras import import_judge_class
        value = import_judge_class(_JUDGES[name], name)
    else:
        raise AttributeError(f"module 'rubrics' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__():
    return __all__
