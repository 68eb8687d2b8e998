"""rubrics.ascore / rubrics.ascore_many: grading from async code, many callers sharing judge batches.

Each call loads its trajectories, runs the code checks and builds its judge requests at once (in the caller's
thread), then hands the requests to the judge's shared JudgeBatcher (rubrics/grading/batching.py) and awaits its own
verdicts: concurrent calls from many coroutines, or from many threads each running its own event loop, land in
one judge call. Plans are compiled once per distinct rubric for the process, and the default judge
(judge=None) is built once per rubric judge setting and kept, so a model is loaded once, not per call.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Iterable, Sequence

from rubrics.grading.batching import JudgeBatcher, shared_batcher
from rubrics.grading.dispatch import group_by_judge, split_back
from rubrics.rubric.compiler import Plan
from rubrics.rubric.spec import Band
from rubrics.grading.jobs import Job, PlanCache, make_jobs
from rubrics.judges.protocol import Judge, Verdict
from rubrics.result import Result
from rubrics.grading.scoring import JudgeChoice, Prepared, Reward, finish, prepare

_PLANS = PlanCache()
_DEFAULT_JUDGES: dict = {}   # JudgeSpec -> the judge built for it
_DEFAULT_JUDGES_LOCK = threading.Lock()


async def _verdicts(prepared: Sequence[Prepared], batcher: JudgeBatcher | None) -> list[list[Verdict]]:
    """Each prepared job's verdicts: one submission per judge holding this call's requests (rubrics/grading/
    dispatch.py), awaited together."""
    calls = group_by_judge(prepared)
    futures = [asyncio.wrap_future(_batcher_of(call.judge, batcher).submit(call.requests)) for call in calls]
    return split_back(prepared, calls, await asyncio.gather(*futures))


def _batcher_of(judge: Judge, batcher: JudgeBatcher | None) -> JudgeBatcher:
    return batcher if batcher is not None and batcher.judge is judge else shared_batcher(judge)


def _choice(judge: Judge | None, batcher: JudgeBatcher | None) -> JudgeChoice:
    """The default judges live as long as the process: every ascore call without a judge must share one judge
    object, or the calls could not share its batches."""
    given = judge if judge is not None else batcher.judge if batcher is not None else None
    return JudgeChoice(given, built=_DEFAULT_JUDGES, lock=_DEFAULT_JUDGES_LOCK)


async def ascore_many(trajectories: Iterable, rubric: Any = None, judge: Judge | None = None, *,
                      uncertain: Band | None = None, reward: Reward = "hard",
                      batcher: JudgeBatcher | None = None) -> list[Result]:
    """score_many, awaitable: the same inputs (one rubric, a rubric per trajectory, or (trajectory, rubric)
    pairs) and the same Results, with the judge requests joining those of concurrent calls in one judge call.
    `batcher`: a JudgeBatcher of your own (its window and size); default: the judge's shared one."""
    jobs = make_jobs(trajectories, rubric, uncertain, plans=_PLANS)
    return await _grade(jobs, _choice(judge, batcher), reward, batcher)


async def ascore(trajectory: Any, rubric: Any, judge: Judge | None = None, *, uncertain: Band | None = None,
                 reward: Reward = "hard", batcher: JudgeBatcher | None = None) -> Result:
    """score, awaitable (raises TrajectoryError for a trajectory that cannot be loaded, RubricError for a bad
    rubric); its judge requests join those of concurrent calls in one judge call."""
    from rubrics.trajectory import load_trajectory

    job = Job(_PLANS.plan(rubric, uncertain), load_trajectory(trajectory))
    [result] = await _grade([job], _choice(judge, batcher), reward, batcher)
    return result


async def _grade(jobs: list[Job], choose: JudgeChoice, reward: Reward,
                 batcher: JudgeBatcher | None) -> list[Result]:
    prepared = [prepare(job, choose(job.plan) if isinstance(job.plan, Plan) else None) for job in jobs]
    verdicts = await _verdicts(prepared, batcher)
    return [finish(p, v, reward) for p, v in zip(prepared, verdicts)]
