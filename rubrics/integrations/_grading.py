"""What every integration shares: importing its framework with an install hint, a Grader that keeps compiled rubrics
and built judges across calls and grades a batch that mixes rubrics in one judge call, and turning results into
rewards."""
from __future__ import annotations

import asyncio
import importlib
import threading
from types import ModuleType
from typing import Any, Sequence, get_args

from rubrics.judges.extras import MissingExtraError
from rubrics.judges.protocol import Judge
from rubrics.result import OnError, Result

INSTALL = "pip install 'agent-rubrics[{extra}]'"
REWARDS = ("hard", "expected")


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import `module`, or raise MissingExtraError saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or module).split(".")[0]
        raise MissingExtraError(f"{purpose} needs the [{extra}] extra ('{missing}' is not installed); install it "
                                f"with: {INSTALL.format(extra=extra)}", name=exc.name) from exc


def check_on_error(on_error: str) -> OnError:
    """Refuse a wrong on_error when the integration is built, not at the first incomplete result mid-training."""
    if on_error not in get_args(OnError):
        raise ValueError(f"on_error: expected 'raise', 'nan' or 'zero', got {on_error!r}")
    return on_error   # type: ignore[return-value]


def check_reward(reward: str) -> str:
    if reward not in REWARDS:
        raise ValueError(f"reward: expected 'hard' (the score) or 'expected' (the expected score), got {reward!r}")
    return reward


class Grader:
    """What an integration keeps between calls: the compiled rubrics (a trainer sends the same rubric text with every
    batch) and the judges built for them (building the embedded judge loads a model, which must not happen at every
    step). A batch may mix rubrics: every judge request of every trajectory goes to its judge in one call, so the
    engine shares the instructions across rubrics and each trajectory's context across its items."""

    def __init__(self, judge: Judge | None = None):
        from rubrics.grading.jobs import PlanCache
        from rubrics.grading.scoring import JudgeChoice

        self.plans = PlanCache()
        self.judges = JudgeChoice(judge)
        # One grading at a time: JudgeChoice builds judges lazily, and a judge is called by one thread at a time
        # unless it declares concurrent_calls (the JudgeBatcher's rule; ascore is the way to share judge calls).
        self._lock = threading.Lock()

    def check(self, rubric: Any) -> None:
        """Compile a rubric now, so that a bad one fails when the integration is built (RubricError)."""
        self.plans.plan(rubric)

    def grade(self, trajectories: Sequence[Any], rubric_sources: Sequence[Any], reward: str = "hard") -> list[Result]:
        """One Result per trajectory, in input order, each against its own rubric (an unusable rubric fails only
        its own trajectories: their results are incomplete)."""
        from rubrics.grading.jobs import make_jobs
        from rubrics.grading.scoring import grade_jobs

        if len(trajectories) != len(rubric_sources):
            raise ValueError(f"{len(trajectories)} trajectories but {len(rubric_sources)} rubrics")
        jobs = make_jobs(list(trajectories), list(rubric_sources), plans=self.plans)
        with self._lock:
            return grade_jobs(jobs, self.judges, reward=reward)   # type: ignore[arg-type]

    def grade_groups(self, groups: Sequence[Sequence[Any]], rubric_sources: Sequence[Any], reward: str = "hard",
                     comparisons: int | None = None) -> list[list[Result]]:
        """Each group's Results (rubrics.score_group: the attempts of one task, compared side by side), each group
        against its own rubric, every group in one judge call and one comparison call."""
        from rubrics.grading.groups import DEFAULT_COMPARISONS, grade_groups
        from rubrics.grading.jobs import make_jobs

        if len(groups) != len(rubric_sources):
            raise ValueError(f"{len(groups)} groups but {len(rubric_sources)} rubrics")
        jobs = [make_jobs(list(group), [source] * len(group), plans=self.plans)
                for group, source in zip(groups, rubric_sources)]
        with self._lock:
            return grade_groups(jobs, self.judges, comparisons=comparisons or DEFAULT_COMPARISONS,  # type: ignore[arg-type]
                                reward=reward)

    async def agrade(self, trajectories: Sequence[Any], rubric_sources: Sequence[Any],
                     reward: str = "hard") -> list[Result]:
        """grade() in a worker thread, so that an async harness (Inspect, verifiers) keeps running its other
        samples while a judge works."""
        return await asyncio.to_thread(self.grade, trajectories, rubric_sources, reward)


def rewards(results: Sequence[Result], on_error: OnError) -> list[float]:
    """Each result's reward. With on_error="raise", the first incomplete result raises IncompleteResultError
    (naming the trajectory and why), so a batch never trains on a partial score."""
    return [result.get_reward(on_error) for result in results]


def verdict_lines(result: Result) -> str:
    """One line per item: its status, id and evidence or error; a trajectory that did not load gives its errors."""
    if not result.items:
        return "\n".join(f"not graded: {error}" for error in result.errors)
    lines = []
    for item in result.items:
        detail = item.error if item.status == "error" else item.evidence
        points = "gate" if item.kind == "gate" else f"{item.points:+d}"
        lines.append(f"{item.status} [{points}] {item.id}: {detail}".rstrip())
    return "\n".join(lines)
