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

`RubricGroupReward` grades the attempts of one task together (rubrics.score_group: each judge item also judged side
by side in pairs, and the attempts ranked). In verifiers the attempts meet in an episode: an Env whose `run()`
starts n agents on the task (as `best-of-n` does) calls it from its `finalize(task, episode)`, the hook verifiers
gives for judging across traces, and it records each trace's reward, metrics and result:

    class RankedEnv(BestOfNEnv):
        rubric = RubricGroupReward("rubric.yaml")

        async def finalize(self, task, episode):
            await self.rubric(task, episode)        # first: best-of-n's own finalize reads the rewards
            await super().finalize(task, episode)
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


class RubricGrading:
    """What RubricReward and RubricGroupReward share: the rubric (one, or each task's own), the judge and the grader
    that keeps them, and what an incomplete result gives."""

    def __init__(self, rubric: Any = None, *, rubric_field: str = "rubric", judge: Judge | None = None,
                 on_error: OnError = "raise", reward: str = "hard", weight: float = 1.0, name: str = "rubric"):
        self.rubric = rubric
        self.rubric_field = rubric_field
        self.on_error = check_on_error(on_error)
        self.reward_kind = check_reward(reward)
        self._vf_weight = float(weight)
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
                             f"{self.rubric_field!r} field; pass {type(self).__name__}(rubric=...) or add the field")
        return source


class RubricReward(RubricGrading):
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

    def __init__(self, rubric: Any = None, *, priority: int = 0, **options: Any):
        super().__init__(rubric, **options)
        self.reward_priority = priority

    async def grade(self, task: Any, trace: Any) -> Result:
        """The Result for one trace (what __call__ turns into a reward)."""
        results = await self._grader.agrade([trace_trajectory(task, trace)], [self._source(task)], self.reward_kind)
        return results[0]

    async def __call__(self, task: Any, trace: Any) -> float:
        result = await self.grade(task, trace)
        record_result(trace, self.__name__, result)
        return result.get_reward(self.on_error)

    def __repr__(self) -> str:
        return f"RubricReward(name={self.__name__!r}, weight={self._vf_weight})"


def record_result(trace: Any, name: str, result: Result) -> None:
    """The full result under trace.info[name], and each evaluated item as the metric `name/<item id>`."""
    trace.info[name] = result.to_dict()
    for item in result.items:
        if item.status != "error":
            trace.record_metric(f"{name}/{item.id}", 1.0 if item.status == "met" else 0.0)


class RubricGroupReward(RubricGrading):
    """The traces of one episode (the n attempts of its task) graded together, for an Env's finalize(task, episode):
    each trace gets its reward (`trace.rewards[name]`, with this reward's weight), metrics and result, as
    RubricReward gives a lone trace. comparisons: other attempts each attempt is compared with (default 2).
    An incomplete result raises (on_error "raise", failing the episode, which verifiers retries) before any
    reward is recorded, or records NaN or 0.0."""

    def __init__(self, rubric: Any = None, *, comparisons: int | None = None, **options: Any):
        super().__init__(rubric, **options)
        if comparisons is not None:
            from rubrics.grading.groups import checked_comparisons

            checked_comparisons(comparisons)
        self.comparisons = comparisons

    async def grade_episode(self, task: Any, episode: Any) -> list[Result]:
        import asyncio

        data = getattr(task, "data", task)
        trajectories = [trace_trajectory(data, trace) for trace in episode.traces]
        [results] = await asyncio.to_thread(self._grader.grade_groups, [trajectories], [self._source(data)],
                                            self.reward_kind, self.comparisons)
        return results

    async def __call__(self, task: Any, episode: Any) -> None:
        results = await self.grade_episode(task, episode)
        rewards = [result.get_reward(self.on_error) for result in results]   # raises before recording anything
        for trace, result, value in zip(episode.traces, results, rewards):
            record_result(trace, self.__name__, result)
            trace.record_reward(self.__name__, value, self._vf_weight)

    def __repr__(self) -> str:
        return f"RubricGroupReward(name={self.__name__!r}, weight={self._vf_weight})"


# For TaskConfig.rewards (plug it under the name "rubric" so its metrics share the reward's name): each task's own
# rubric (its `rubric` field), the rubric's judge, an incomplete result raises.
task_rubric = RubricReward(name="rubric")
