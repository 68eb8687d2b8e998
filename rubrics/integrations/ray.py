"""Grading a Ray Data dataset of trajectories: `RubricGrader` is a callable class for `Dataset.map_batches`.

    import ray
    from rubrics.integrations.ray import RubricGrader

    ds = ray.data.read_json("trajectories.jsonl")        # a `trajectory` column, or use grade_dataset()
    graded = ds.map_batches(RubricGrader, fn_constructor_kwargs={"rubric": rubric_yaml_text, "judge": "openai",
                                                                 "base_url": "http://judge:8000/v1"},
                            compute=ray.data.ActorPoolStrategy(size=8), batch_size=64)

Ray builds one RubricGrader per actor, so each actor builds its judge once (an embedded model loaded once, or
one HTTP client to a serving cluster) and grades every batch it is given with it; the trajectories of a batch go
to the judge in one call. Each output row is the input row plus `rubric_score`, `rubric_reward`,
`rubric_complete` and `rubric_result` (the full result as JSON text).
"""
from __future__ import annotations

from typing import Any, Callable

from rubrics.integrations._grading import Grader, check_on_error, check_reward, require, rewards
from rubrics.trajectory.json_text import dumps
from rubrics.judges.protocol import Judge
from rubrics.result import OnError

require("numpy", "ray", "rubrics.integrations.ray")
import numpy as np  # noqa: E402  (after the install hint)

JUDGE_KINDS = ("embedded", "openai", "none")
OUTPUT_COLUMNS = ("rubric_score", "rubric_reward", "rubric_complete", "rubric_result")


def plain(value: Any) -> Any:
    """A value as Python lists and dicts: Ray hands nested columns over as numpy arrays and scalars."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()] if value.dtype != object else [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: plain(v) for key, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def make_judge(judge: str | Callable[[], Judge] | None, model: str | None, base_url: str | None,
               judge_options: dict[str, Any]) -> Judge | None:
    """The judge an actor uses; None leaves it to the rubric (its panel or calibration, else the embedded one)."""
    if judge is None:
        return None
    if callable(judge):
        return judge()
    if judge not in JUDGE_KINDS:
        raise ValueError(f"judge: expected one of {', '.join(JUDGE_KINDS)}, a judge factory or None; got {judge!r}")
    if judge == "openai" and not base_url:
        raise ValueError("judge='openai' needs base_url, e.g. http://judge-cluster:8000/v1")
    from rubrics.judges.factory import JudgeSpec, build_judge

    return build_judge(JudgeSpec(judge, model=model, base_url=base_url, options=judge_options))


class RubricGrader:
    """Grades the trajectories of a batch. Construct it in the actor (Ray does, from fn_constructor_kwargs):

    rubric: one rubric for every row (path, YAML text, dict or Rubric: a path must exist on every node, YAML text
        travels with the task); None: each row's own, from `rubric_column`.
    trajectory_column: each row's trajectory: JSON text, a dict, a list of chat messages or a path.
    judge: "embedded" (`model` a local folder or .gguf, default the embedded model), "openai" (`base_url` and
        `model` of an OpenAI-compatible server: vLLM, SGLang), "none", a zero-argument factory returning a judge,
        or None for the rubric's own. `judge_options` go to the judge's constructor.
    on_error: an incomplete result "raise"s (the default: the job fails and names the trajectory), or gives NaN
        ("nan") or 0.0 ("zero") in `rubric_reward`; `rubric_complete` and `rubric_result` say why either way.
    """

    def __init__(self, rubric: Any = None, *, rubric_column: str = "rubric", trajectory_column: str = "trajectory",
                 judge: str | Callable[[], Judge] | None = None, model: str | None = None,
                 base_url: str | None = None, judge_options: dict[str, Any] | None = None,
                 on_error: OnError = "raise", reward: str = "hard"):
        self.rubric = rubric
        self.rubric_column = rubric_column
        self.trajectory_column = trajectory_column
        self.on_error = check_on_error(on_error)
        self.reward = check_reward(reward)
        self._grader = Grader(make_judge(judge, model, base_url, dict(judge_options or {})))
        if rubric is not None:
            self._grader.check(rubric)

    def __call__(self, batch: Any) -> Any:
        columns = list(batch.columns) if hasattr(batch, "columns") else list(batch)
        if self.trajectory_column not in columns:
            raise KeyError(f"RubricGrader: no {self.trajectory_column!r} column among {columns}")
        if self.rubric is None and self.rubric_column not in columns:
            raise KeyError(f"RubricGrader: no rubric given and no {self.rubric_column!r} column among {columns}")
        trajectories = [plain(value) for value in batch[self.trajectory_column]]
        sources = ([self.rubric] * len(trajectories) if self.rubric is not None
                   else [plain(value) for value in batch[self.rubric_column]])
        results = self._grader.grade(trajectories, sources, self.reward)
        graded = {
            "rubric_score": np.array([r.score for r in results], dtype=np.float64),
            "rubric_reward": np.array(rewards(results, self.on_error), dtype=np.float64),
            "rubric_complete": np.array([r.complete for r in results], dtype=bool),
            "rubric_result": np.array([dumps(r.to_dict()) for r in results], dtype=object),
        }
        if hasattr(batch, "assign"):   # a pandas DataFrame
            return batch.assign(**graded)
        return {**batch, **graded}


def grade_dataset(dataset: Any, rubric: Any = None, *, concurrency: int = 1, batch_size: int = 64,
                  map_options: dict[str, Any] | None = None, **grader_options: Any) -> Any:
    """`dataset.map_batches(RubricGrader, ...)` with a fixed pool of `concurrency` actors. A rubric given as a
    path or text is loaded here first, so a bad rubric fails before any actor starts and no node needs the
    file. `map_options` go to map_batches (e.g. num_cpus per actor); the rest to RubricGrader."""
    ray_data = require("ray.data", "ray", "rubrics.integrations.ray.grade_dataset")
    if rubric is not None:
        from rubrics.rubric.load import load_rubric

        rubric = load_rubric(rubric)
    return dataset.map_batches(RubricGrader, fn_constructor_kwargs={"rubric": rubric, **grader_options},
                               compute=ray_data.ActorPoolStrategy(size=concurrency), batch_size=batch_size,
                               **(map_options or {}))
