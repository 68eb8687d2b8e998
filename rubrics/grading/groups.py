"""Grading the attempts of one task together: rubrics.score_group, `rubric grade --group-by task_id`, and the TRL and
verifiers group rewards.

    attempts ─► each graded as alone (code checks, facts, one pointwise verdict per judge item, one judge call)
             ─► per judge item, the attempts the judge judged compared in pairs, side by side, in both orders
                (ComparisonRequest; every pair of every item and group in one compare() call per judge)
             ─► per item, Bradley-Terry strengths (pointwise logit as prior) and the group's pointwise
                probabilities handed out by strength (group_ranking.py)
             ─► each attempt's Result, its judge items carrying their GroupPlace

An RL trainer needs the ranking of the n attempts at a task more than n lone verdicts, and telling which of two
attempts got the number right is an easier question for a small judge than judging one alone. A group whose
attempts are all met (or all unmet) on an item keeps its verdicts; the comparisons decide which attempts meet it
when the pointwise verdicts are mixed or wrong. Each attempt is compared with `comparisons` others (a circle), so
the work grows as n * comparisons, not n squared: the cost is measured in docs/judge-quality.md.

A judge that cannot compare (no `compare`: a panel, a scripted judge) grades the group pointwise, with a warning.
One attempt that does not load, or that the judge cannot judge on an item, is left out of that item's ranking and
costs the others nothing.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rubrics.grading.group_ranking import Preference, comparison_pairs, debiased_log_odds, pointwise_logit, ranks, \
    reassigned, strengths
from rubrics.grading.jobs import Job, PlanCache, make_jobs
from rubrics.grading.scoring import JudgeChoice, Prepared, Progress, Reward, failed_result, finish_items, judge_all, \
    judged_items, prepare
from rubrics.judges.protocol import ComparisonRequest, Judge, JudgeContext, PairContext, Verdict
from rubrics.judges.usage import JudgeUsage
from rubrics.result import GroupPlace, Result
from rubrics.rubric.compiler import JudgeStep, Plan, item_id_of
from rubrics.rubric.spec import Band

# Other attempts each attempt is compared with on an item (both orders each): see docs/judge-quality.md for what
# more or fewer buy.
DEFAULT_COMPARISONS = 2
MAX_COMPARISONS = 64


class GroupingWarning(UserWarning):
    """A group was graded pointwise: its judge cannot compare attempts side by side."""


@dataclass
class Attempt:
    """One attempt of a group, between grading steps: prepared (code checks, facts, requests), then its judge items'
    verdicts (pointwise, then the group's), and where the group ranked it."""
    prepared: Prepared
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    places: dict[str, GroupPlace] = field(default_factory=dict)

    @property
    def graded(self) -> bool:
        return self.prepared.graded

    @property
    def plan(self) -> Plan:
        return self.prepared.job.plan

    @property
    def sort_key(self) -> str:
        return str(getattr(self.prepared.job.trajectory, "id", ""))

    def context_of(self, item_id: str) -> JudgeContext | None:
        """The evidence the attempt's item was judged in (its first request's: an item's parts share it)."""
        return next((r.context for r in self.prepared.requests if item_id_of(r.item.id) == item_id), None)

    def judged_on(self, item_id: str) -> bool:
        verdict = self.verdicts.get(item_id)
        return verdict is not None and verdict.error is None and verdict.met is not None \
            and verdict.probability is not None

    def result(self, reward: Reward) -> Result:
        if not self.graded:
            return failed_result(self.plan, self.prepared.job.trajectory, reward)
        return finish_items(self.prepared, self.verdicts, reward, self.places)


@dataclass
class ItemRanking:
    """The attempts of one group the judge judged on one item, the pairs to compare, and the ranking made of them."""
    step: JudgeStep
    judge: Judge
    contenders: list[Attempt]
    pairs: list[tuple[int, int]]

    def requests(self) -> list[ComparisonRequest]:
        """Each pair in both orders: (i first, j first)."""
        item_id, asked = self.step.item.id, self.step.judge
        out = []
        for i, j in self.pairs:
            first, second = self.contenders[i].context_of(item_id), self.contenders[j].context_of(item_id)
            out += [ComparisonRequest(PairContext(first, second), asked),
                    ComparisonRequest(PairContext(second, first), asked)]
        return out

    def apply(self, verdicts: Sequence[Verdict]) -> None:
        """The comparisons' verdicts (requests() order) turned into each contender's group verdict and place."""
        item_id = self.step.item.id
        preferences, partners = [], [set() for _ in self.contenders]
        for (i, j), forward, backward in zip(self.pairs, verdicts[0::2], verdicts[1::2]):
            self._charge(i, forward)
            self._charge(j, backward)
            if forward.probability is None or backward.probability is None or forward.error or backward.error:
                continue   # a pair judged in one order only would keep its position bias: left out
            preferences.append(Preference(i, j, debiased_log_odds(forward.probability, backward.probability)))
            partners[i].add(j)
            partners[j].add(i)
        alone = [attempt.verdicts[item_id].probability for attempt in self.contenders]
        fitted = strengths([pointwise_logit(p) for p in alone], preferences)
        grouped = reassigned(alone, fitted)
        for attempt, probability, own, strength, rank, seen in zip(self.contenders, grouped, alone, fitted,
                                                                   ranks(fitted), partners):
            verdict = attempt.verdicts[item_id]
            attempt.verdicts[item_id] = replace(verdict, met=probability >= self.step.threshold,
                                                probability=probability)
            attempt.places[item_id] = GroupPlace(attempts=len(self.contenders), rank=rank, compared_with=len(seen),
                                                 strength=round(strength, 6), alone=own)

    def _charge(self, index: int, verdict: Verdict) -> None:
        """A comparison's work counts in the usage of the attempt shown first."""
        if verdict.usage is None:
            return
        attempt = self.contenders[index]
        item_id = self.step.item.id
        own = attempt.verdicts[item_id]
        attempt.verdicts[item_id] = replace(own, usage=(own.usage or JudgeUsage()) + verdict.usage)


def item_rankings(group: Sequence[Attempt], comparisons: int) -> list[ItemRanking]:
    """One ranking per judge item of the group's rubric with at least two attempts judged on it."""
    graded = [a for a in group if a.graded and a.prepared.judge is not None]
    if not graded:
        return []
    plan = graded[0].plan
    same = sorted((a for a in graded if a.plan is plan), key=lambda a: a.sort_key)
    rankings = []
    for step in plan.judge_steps:
        contenders = [a for a in same if a.judged_on(step.item.id)]
        if len(contenders) >= 2:
            rankings.append(ItemRanking(step, graded[0].prepared.judge, contenders,
                                        comparison_pairs(len(contenders), comparisons)))
    return rankings


def compare_all(rankings: Sequence[ItemRanking]) -> None:
    """Every ranking's comparisons, one compare() call per judge, and each ranking applied."""
    by_judge: dict[int, list[ItemRanking]] = {}
    for ranking in rankings:
        by_judge.setdefault(id(ranking.judge), []).append(ranking)
    for group in by_judge.values():
        judge = group[0].judge
        compare = getattr(judge, "compare", None)
        if not callable(compare):
            warnings.warn(f"judge {getattr(judge, 'name', judge)!r} cannot compare attempts side by side: the group "
                          "was graded pointwise", GroupingWarning, stacklevel=3)
            continue
        asked = [ranking.requests() for ranking in group]
        answers = call_compare(compare, [request for requests in asked for request in requests])
        stream = iter(answers)
        for ranking, requests in zip(group, asked):
            ranking.apply([next(stream) for _ in requests])


def call_compare(compare: Callable, requests: list[ComparisonRequest]) -> list[Verdict]:
    """The judge's comparisons, or one error verdict per request when the call as a whole fails (a pair left
    out of its ranking, never a lost group)."""
    if not requests:
        return []
    try:
        verdicts = list(compare(requests))
    except Exception as exc:  # noqa: BLE001 - the group keeps its pointwise verdicts
        reason = f"comparison failed: {type(exc).__name__}: {exc}"
        return [Verdict(met=None, probability=None, error=reason) for _ in requests]
    if len(verdicts) != len(requests):
        return [Verdict(met=None, probability=None, error="the judge returned the wrong number of comparisons")
                for _ in requests]
    return verdicts


def grade_groups(groups: Sequence[Sequence[Job]], judges: Callable[[Plan], Judge | None], *,
                 comparisons: int = DEFAULT_COMPARISONS, progress: Progress | None = None,
                 reward: Reward = "hard") -> list[list[Result]]:
    """One Result per job, group by group, in order. `judges` gives each plan its judge."""
    comparisons = checked_comparisons(comparisons)
    attempts = [[Attempt(prepare(job, judges(job.plan) if isinstance(job.plan, Plan) else None)) for job in group]
                for group in groups]
    everyone = [attempt for group in attempts for attempt in group]
    for attempt, verdicts in zip(everyone, judge_all([a.prepared for a in everyone])):
        if attempt.graded:
            attempt.verdicts = judged_items(attempt.prepared, verdicts)
    compare_all([ranking for group in attempts for ranking in item_rankings(group, comparisons)])
    results, total, done = [], len(everyone), 0
    for group in attempts:
        results.append([attempt.result(reward) for attempt in group])
        done += len(group)
        if progress is not None:
            progress(done, total)
    return results


def grade_by_task(jobs: Sequence[Job], judges: Callable[[Plan], Judge | None], *,
                  comparisons: int = DEFAULT_COMPARISONS, progress: Progress | None = None,
                  reward: Reward = "hard") -> list[Result]:
    """`rubric grade --group-by task_id`: the jobs that share a rubric and a task_id graded as one group; a job
    without a task_id (or whose trajectory did not load) alone. One Result per job, in job order."""
    groups: dict[tuple, list[Job]] = {}
    for index, job in enumerate(jobs):
        task_id = getattr(job.trajectory, "task_id", None)
        key = (id(job.plan), task_id) if task_id is not None else ("alone", index)
        groups.setdefault(key, []).append(job)
    graded = grade_groups(list(groups.values()), judges, comparisons=comparisons, progress=progress, reward=reward)
    result_of = {id(job): result for group, results in zip(groups.values(), graded) for job, result in
                 zip(group, results)}
    return [result_of[id(job)] for job in jobs]


def checked_comparisons(comparisons: Any) -> int:
    if isinstance(comparisons, bool) or not isinstance(comparisons, int) or not 1 <= comparisons <= MAX_COMPARISONS:
        raise ValueError(f"comparisons: expected an integer from 1 to {MAX_COMPARISONS} (other attempts each attempt "
                         f"is compared with), got {comparisons!r}")
    return comparisons


def score_groups(groups: Iterable[Iterable], rubric: Any = None, judge: Judge | None = None, *,
                 comparisons: int = DEFAULT_COMPARISONS, uncertain: Band | None = None,
                 reward: Reward = "hard") -> list[list[Result]]:
    """score_group for several groups at once (the attempts of several tasks), every judge request and every
    comparison of all of them in one judge call each. `rubric`: one rubric for every group, a list with one rubric
    per group, or None when each group holds (trajectory, rubric) pairs."""
    groups = [list(group) for group in groups]
    per_group = rubric if isinstance(rubric, list) else [rubric] * len(groups)
    if len(per_group) != len(groups):
        raise ValueError(f"{len(groups)} groups but {len(per_group)} rubrics")
    plans = PlanCache()
    jobs = [make_jobs(group, source, uncertain, plans=plans) for group, source in zip(groups, per_group)]
    return grade_groups(jobs, JudgeChoice(judge), comparisons=comparisons, reward=reward)


def score_group(trajectories: Iterable, rubric: Any, judge: Judge | None = None, *,
                comparisons: int = DEFAULT_COMPARISONS, uncertain: Band | None = None,
                reward: Reward = "hard") -> list[Result]:
    """Grade the attempts of one task together: one Result per trajectory, in input order.

    Code checks and facts as score_many; each judge item judged pointwise, then the attempts compared side by side
    in pairs (each with `comparisons` others, in both orders), and the group's pointwise probabilities handed out
    in the order the comparisons rank the attempts (rubrics/grading/group_ranking.py): the judge decides how many
    attempts meet an item, the comparisons which. Each judge item's result says its place (ItemResult.group). A
    group of one is graded as score_many grades it."""
    return score_groups([trajectories], rubric, judge, comparisons=comparisons, uncertain=uncertain,
                        reward=reward)[0]
