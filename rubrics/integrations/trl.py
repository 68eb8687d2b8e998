"""A rubric as a TRL reward function.

    from trl import GRPOTrainer
    from rubrics.integrations.trl import rubric_reward

    trainer = GRPOTrainer(model=..., reward_funcs=rubric_reward(), train_dataset=dataset)   # a `rubric` column

GRPOTrainer calls a reward function as `f(prompts=..., completions=..., completion_ids=..., **columns)`, where
`columns` holds every other dataset column (one value per completion) and the trainer's `trainer_state`,
`log_extra` and `log_metric`. The function returned here grades each prompt + completion as a trajectory of
chat messages and returns one reward per completion. The function itself needs no import of trl.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from rubrics.integrations._grading import Grader, check_on_error, check_reward, rewards
from rubrics.judges.protocol import Judge
from rubrics.result import OnError, Result

# (prompt, completion, row) -> a trajectory (anything rubrics.load_trajectory takes); row: that completion's
# dataset columns.
TrajectoryBuilder = Callable[[Any, Any, dict[str, Any]], Any]
# The trainer's own arguments, which are not dataset columns.
TRAINER_KWARGS = frozenset({"completion_ids", "trainer_state", "log_extra", "log_metric", "environments"})


class RewardFunction(Protocol):
    __name__: str
    last_results: list[Result]

    def __call__(self, prompts: list, completions: list, **kwargs: Any) -> list[float]: ...


def as_messages(prompt: Any, completion: Any) -> list[dict[str, Any]]:
    """The conversation of one prompt and completion: a conversational dataset gives lists of chat messages
    (the completion may hold tool calls and tool results), a standard one gives text."""
    head = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
    tail = list(completion) if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
    return head + tail


def default_trajectory(prompt: Any, completion: Any, row: dict[str, Any]) -> dict[str, Any]:
    """The trajectory of one completion: its messages; `task_id` and `state` (files, tests, outbox the rollout
    left behind) when the dataset has such columns."""
    trajectory: dict[str, Any] = {"messages": as_messages(prompt, completion)}
    for column in ("task_id", "state"):
        if row.get(column) is not None:
            trajectory[column] = row[column]
    return trajectory


def grade_by_prompt(grader: Grader, prompts: list, trajectories: list, sources: list, reward: str,
                    comparisons: int | None) -> list[Result]:
    """The completions of each prompt (and rubric) graded as one group; Results in completion order."""
    import json

    groups: dict[str, list[int]] = {}
    for index, (prompt, source) in enumerate(zip(prompts, sources)):
        key = json.dumps([prompt, source if isinstance(source, str) else id(source)], sort_keys=True, default=repr)
        groups.setdefault(key, []).append(index)
    members = list(groups.values())
    graded = grader.grade_groups([[trajectories[i] for i in member] for member in members],
                                 [sources[member[0]] for member in members], reward, comparisons)
    results: list[Result | None] = [None] * len(trajectories)
    for member, group_results in zip(members, graded):
        for index, result in zip(member, group_results):
            results[index] = result
    return results   # type: ignore[return-value]


def rubric_reward(rubric: Any = None, *, rubric_column: str = "rubric", judge: Judge | None = None,
                  on_error: OnError = "raise", reward: str = "hard", name: str = "rubric",
                  to_trajectory: TrajectoryBuilder = default_trajectory, group: bool = False,
                  comparisons: int | None = None) -> RewardFunction:
    """A GRPOTrainer reward function that grades each completion against a rubric.

    rubric: one rubric for every sample (a path, YAML text, dict or Rubric); None: each sample's own, from the
        dataset column `rubric_column` (a path or YAML text: a dataset stores text more reliably than nested
        dicts). Rubrics are loaded once per process.
    judge: the judge for judge items; None: the rubric's (its panel or calibration, else the embedded judge),
        built once on first use. A rubric with code checks only never builds one.
    on_error: what an incomplete result (an item not evaluated, a conversation that does not load) gives:
        "raise" (the default) raises rubrics.result.IncompleteResultError and stops the step; "nan" returns NaN,
        which TRL leaves out of that function's reward (as it does None); "zero" returns 0.0, a failed task.
    reward: "hard" (the score) or "expected" (the expected score over the judge's probabilities).
    name: the name TRL logs the reward under (`rewards/<name>/mean`, the completions table's column).
    to_trajectory: builds each trajectory from (prompt, completion, row): the sample's dataset columns, and under
        "environment" its environment when the trainer runs an environment_factory (to read the files or tests
        the rollout left there).

    group: grade the completions of one prompt together (rubrics.score_group): GRPO samples several completions per
        prompt and learns from their ranking, and the judge compares them side by side on each judge item (each with
        `comparisons` others, default 2, in both orders) besides judging each alone. Completions are grouped by
        their prompt and rubric; a prompt with one completion is graded alone.

    The returned function keeps the Results of its last call in `last_results` (same order as the completions),
    for inspection; with `log_metric` from the trainer it also logs `<name>/incomplete`, the fraction of
    incomplete results, so a run with on_error="nan" shows how much it masked.
    """
    on_error = check_on_error(on_error)
    check_reward(reward)
    if comparisons is not None:
        from rubrics.grading.groups import checked_comparisons

        checked_comparisons(comparisons)
        if not group:
            raise ValueError("comparisons: applies to group=True (the completions of one prompt graded together)")
    grader = Grader(judge)
    if rubric is not None:
        grader.check(rubric)   # a bad rubric fails here, before the trainer starts, not at the first step

    def reward_function(prompts: list, completions: list, **kwargs: Any) -> list[float]:
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        columns = {key: value for key, value in kwargs.items() if key not in TRAINER_KWARGS}
        if rubric is None and rubric_column not in columns:
            raise KeyError(f"reward {name!r}: no rubric given and no {rubric_column!r} column among the dataset "
                           f"columns {sorted(columns)}; pass rubric_reward(rubric=...) or add the column")
        rows = [{key: value[i] for key, value in columns.items()} for i in range(len(prompts))]
        environments = kwargs.get("environments")
        if isinstance(environments, list) and len(environments) == len(rows):   # environment_factory rollouts
            for row, environment in zip(rows, environments):
                row.setdefault("environment", environment)
        trajectories = []
        for i, (prompt, completion, row) in enumerate(zip(prompts, completions, rows)):
            trajectory = to_trajectory(prompt, completion, row)
            if isinstance(trajectory, dict) and trajectory.get("id") is None:
                trajectory = {**trajectory, "id": f"completion-{i}"}   # errors then name the completion
            trajectories.append(trajectory)
        sources = [rubric] * len(prompts) if rubric is not None else [row[rubric_column] for row in rows]
        results = grade_by_prompt(grader, prompts, trajectories, sources, reward, comparisons) if group \
            else grader.grade(trajectories, sources, reward)
        reward_function.last_results = results
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and results:
            log_metric(f"{name}/incomplete", sum(not r.complete for r in results) / len(results))
        return rewards(results, on_error)

    reward_function.__name__ = reward_function.__qualname__ = name
    reward_function.last_results = []
    return reward_function   # type: ignore[return-value]
