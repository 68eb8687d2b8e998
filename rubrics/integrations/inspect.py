"""A rubric as an Inspect AI scorer.

    from inspect_ai import Task, eval
    from inspect_ai.solver import generate
    from rubrics.integrations.inspect import rubric_scorer

    eval(Task(dataset=samples, solver=generate(), scorer=rubric_scorer("rubric.yaml")), model="openai/gpt-4o")

Each sample's conversation (messages, tool calls, tool results) is graded as a trajectory. The Score's value is
the rubric score, its explanation the item verdicts (one line each), its metadata the full result
(`Result.to_dict()`), its answer the final assistant text. Metrics: mean and stderr of the scores.
"""
from __future__ import annotations

from typing import Any, Callable

from rubrics.integrations._grading import Grader, check_on_error, require, verdict_lines
from rubrics.judges.protocol import Judge
from rubrics.result import OnError

require("inspect_ai", "inspect", "rubrics.integrations.inspect")
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr  # noqa: E402  (after the install hint)
from inspect_ai.solver import TaskState  # noqa: E402


def message_dict(message: Any) -> dict[str, Any]:
    """One Inspect chat message in the trajectory format."""
    data: dict[str, Any] = {"role": message.role, "content": message.text}
    for call in getattr(message, "tool_calls", None) or []:
        data.setdefault("tool_calls", []).append({"id": call.id, "name": call.function, "arguments": call.arguments})
    if message.role == "tool":
        data["tool_call_id"] = message.tool_call_id
        if message.function:
            data["name"] = message.function
        if message.error is not None:   # the tool failed: the agent saw the error, so the grader must too
            data["content"] = "\n".join(filter(None, [message.text, f"error: {message.error.message}"]))
    return data


def state_trajectory(state: TaskState) -> dict[str, Any]:
    """A sample's trajectory: its messages, its sample id (and epoch, when there are several)."""
    sample = str(state.sample_id) if state.epoch <= 1 else f"{state.sample_id}:{state.epoch}"
    return {"id": sample, "task_id": str(state.sample_id), "messages": [message_dict(m) for m in state.messages]}


@scorer(metrics=[mean(), stderr()])
def rubric_scorer(rubric: Any = None, *, rubric_field: str = "rubric", judge: Judge | None = None,
                  on_error: OnError = "raise",
                  to_trajectory: Callable[[TaskState], Any] = state_trajectory) -> Scorer:
    """An Inspect scorer grading each sample against a rubric.

    rubric: one rubric for every sample (path, YAML text, dict or Rubric); None: each sample's own, from its
        metadata key `rubric_field`.
    judge: None: the rubric's (its panel or calibration, else the embedded judge), built once on first use.
    on_error: an incomplete result (an item not evaluated) "raise"s IncompleteResultError (the default: Inspect
        reports the sample as errored), or scores NaN ("nan") or 0.0 ("zero"); the metadata says why either way.
    to_trajectory: builds the trajectory from the TaskState (e.g. to add `state.files` from the sandbox).
    """
    on_error = check_on_error(on_error)
    grader = Grader(judge)
    if rubric is not None:
        grader.check(rubric)   # a bad rubric fails when the task is built, before any sample runs

    async def score(state: TaskState, target: Target) -> Score:
        source = rubric if rubric is not None else (state.metadata or {}).get(rubric_field)
        if source is None:
            raise ValueError(f"rubric_scorer: no rubric given and sample {state.sample_id!r} has no "
                             f"{rubric_field!r} metadata; pass rubric_scorer(rubric=...) or add it to the sample")
        result = (await grader.agrade([to_trajectory(state)], [source]))[0]
        return Score(value=result.get_reward(on_error), answer=state.output.completion if state.output else None,
                     explanation=verdict_lines(result), metadata=result.to_dict())

    return score
