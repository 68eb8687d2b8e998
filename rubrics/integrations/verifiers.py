"""A rubric as a weighted reward of a verifiers task (verifiers 0.4, `import verifiers.v1 as vf`).

verifiers scores a trace with its task's rewards: methods tagged `@vf.reward(weight=...)`, or functions plugged
by import path in `TaskConfig.rewards`, each `async (task, trace) -> float`; the trace's reward is the weighted
sum. `RubricReward` is such a reward:

    class SupportTask(vf.Task[SupportData, vf.State]):
        rubric = RubricReward("rubric.yaml", weight=1.0)        # or no rubric: each task's `rubric` field

    vf.TaskConfig(rewards={"rubric": vf.RewardFunctionConfig(fn="rubrics.integrations.verifiers:task_rubric",
                                                             weight=2.0)})

Each rubric item's verdict is also recorded as a trace metric `<name>/<item id>` (1.0 met, 0.0 unmet), and the
full result goes to `trace.info[<name>]`.
"""
from __future__ import annotations

from typing import Any

from rubrics.integrations._grading import Grader, check_on_error, check_reward, require
from rubrics.judges.protocol import Judge
from rubrics.result import OnError, Result

require("verifiers.v1", "verifiers", "rubrics.integrations.verifiers")
from verifiers.v1.dialects.chat import message_to_wire  # noqa: E402  (after the install hint)


def trace_trajectory(task: Any, trace: Any) -> dict[str, Any]:
    """A verifiers trace as a trajectory: the messages of its final branch in OpenAI chat form (tool calls
    included), the root agent's reply as the final answer when the trace has sub-agents."""
    trajectory: dict[str, Any] = {"id": trace.id, "messages": [message_to_wire(m) for m in trace.messages]}
    task_id = getattr(task, "id", None)
    if task_id is not None:
        trajectory["task_id"] = task_id
    if trace.root_reply is not None:
        trajectory["final_answer"] = trace.root_reply
    return trajectory


class RubricReward:
    """A verifiers reward that grades the trace against a rubric: what `@vf.reward(weight=..., priority=...)`
    makes of a method, as an object, so it can carry its rubric and judge.

    rubric: one rubric for every task (path, YAML text, dict or Rubric); None: each task's own, from its data
        field `rubric_field` (a path or YAML text).
    judge: None: the rubric's (its panel or calibration, else the embedded judge), built once on first use.
    on_error: an incomplete result "raise"s (the default: verifiers records the rollout as errored, it is not
        scored), or gives NaN ("nan") or 0.0 ("zero").
    """

    # The tags verifiers' discovery and Task.score read (verifiers.v1.utils.decorators.reward sets the same).
    reward = True

    def __init__(self, rubric: Any = None, *, rubric_field: str = "rubric", judge: Judge | None = None,
                 on_error: OnError = "raise", reward: str = "hard", weight: float = 1.0, priority: int = 0,
                 name: str = "rubric"):
        self.rubric = rubric
        self.rubric_field = rubric_field
        self.on_error = check_on_error(on_error)
        self.reward_kind = check_reward(reward)
        self._vf_weight = float(weight)
        self.reward_priority = priority
        self.__name__ = name
        self._grader = Grader(judge)
        if rubric is not None:
            self._grader.check(rubric)   # a bad rubric fails when the task class is defined, not mid-run

    def _source(self, task: Any) -> Any:
        if self.rubric is not None:
            return self.rubric
        source = getattr(task, self.rubric_field, None)
        if source is None:
            raise ValueError(f"reward {self.__name__!r}: no rubric given and the task data has no "
                             f"{self.rubric_field!r} field; pass RubricReward(rubric=...) or add the field")
        return source

    async def grade(self, task: Any, trace: Any) -> Result:
        """The Result for one trace (what __call__ turns into a reward)."""
        results = await self._grader.agrade([trace_trajectory(task, trace)], [self._source(task)], self.reward_kind)
        return results[0]

    async def __call__(self, task: Any, trace: Any) -> float:
        result = await self.grade(task, trace)
        trace.info[self.__name__] = result.to_dict()
        for item in result.items:
            if item.status != "error":
                trace.record_metric(f"{self.__name__}/{item.id}", 1.0 if item.status == "met" else 0.0)
        return result.get_reward(self.on_error)

    def __repr__(self) -> str:
        return f"RubricReward(name={self.__name__!r}, weight={self._vf_weight})"


# For TaskConfig.rewards (plug it under the name "rubric" so its metrics share the reward's name): each task's own
# rubric (its `rubric` field), the rubric's judge, an incomplete result raises.
task_rubric = RubricReward(name="rubric")
