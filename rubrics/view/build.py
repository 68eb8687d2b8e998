"""From the command's files to the page's data: results (or judge-eval output), the compared run, the trajectories
and the rubrics' thresholds. Files that cannot be read raise ViewInputError; bad lines inside them are problems
shown on the page."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rubrics.view.compare import compare_runs
from rubrics.view.evidence_marks import mark
from rubrics.view.judge_eval_file import BadJudgeEval, NotJudgeEval, load_judge_eval
from rubrics.view.page_model import RunView, ViewData, build_run
from rubrics.view.results_file import ResultsFile, load_results
from rubrics.view.thresholds import RubricBands, rubric_bands
from rubrics.view.trajectories import TrajectoryView, lay_out, load_trajectories


class ViewInputError(ValueError):
    """A file named on the command line that cannot be read at all."""


@dataclass(frozen=True)
class ViewInputs:
    results: str
    compare: str | None = None
    trajectories: list[str] = field(default_factory=list)
    rubrics: list[str] = field(default_factory=list)
    prices: tuple[float, float] | None = None


def build_view_data(inputs: ViewInputs) -> ViewData:
    judge_eval = _judge_eval_or_none(inputs.results)
    if judge_eval is not None:
        return ViewData(title=f"judge evaluation · {Path(inputs.results).name}", run=None, other=None,
                        comparison=None, judge_eval=judge_eval, problems=[], notes=[])
    try:
        bands: RubricBands = rubric_bands(inputs.rubrics)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the rubric's, reported as such
        raise ViewInputError(f"--rubric: {exc}") from exc
    by_id, notes = load_trajectories(inputs.trajectories) if inputs.trajectories else ({}, [])
    run_file = _read(inputs.results)
    run = _run(run_file, bands, by_id, inputs.prices)
    other_file = _read(inputs.compare) if inputs.compare else None
    other = _run(other_file, bands, by_id, inputs.prices) if other_file else None
    comparison = (compare_runs(run_file.results, other_file.results, run_file.path, other_file.path)
                  if other_file else None)
    problems = run_file.problems + (other_file.problems if other_file else [])
    return ViewData(title=f"results · {Path(inputs.results).name}", run=run, other=other, comparison=comparison,
                    judge_eval=None, problems=problems, notes=notes)


def _judge_eval_or_none(path: str):
    if not path.endswith(".json"):
        return None   # judge-eval output is one JSON document; JSON lines are results
    try:
        return load_judge_eval(path)
    except NotJudgeEval:
        return None
    except BadJudgeEval as exc:
        raise ViewInputError(str(exc)) from exc
    except OSError as exc:
        raise ViewInputError(f"{path}: {exc.strerror or exc}") from exc


def _read(path: str) -> ResultsFile:
    try:
        return load_results(path)
    except OSError as exc:
        raise ViewInputError(f"{path}: {exc.strerror or exc}") from exc


def _run(loaded: ResultsFile, bands: RubricBands, by_id: dict, prices) -> RunView:
    views: list[TrajectoryView | None] = []
    for result in loaded.results:
        trajectory = by_id.get(result.trajectory_id)
        views.append(mark(lay_out(trajectory), result) if trajectory is not None else None)
    return build_run(loaded, bands, views, prices)
