"""Plan + trajectories + judge -> Results: score = 0 when a gate fails, else min(1, max(0, earned) / total).

Each Result also says how sure it is (rubrics/grading/expectation.py): the expected score over the judge's
probabilities, and the range of scores over the items whose probability lies in their uncertain band.

Every judge request of every trajectory goes to the judge in one call, so the engine can batch them
and share prompt prefixes. Whatever goes wrong with one trajectory or one item (a trajectory that
will not load, a check that fails, a judge that errors) is reported on that trajectory or item only.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Sequence

from rubrics.rubric.compiler import CodeStep, JudgeStep, Plan
from rubrics.grading.dispatch import group_by_judge, split_back
from rubrics.checks.facts import FactsOutcome
from rubrics.grading.expectation import Band, Outcome, expected_score, hard_score, in_band, score_range
from rubrics.grading.jobs import Job, LoadFailure, Pair, PlanCache, RubricFailure, make_jobs
from rubrics.grading.item_facts import FactFinder, missing_facts_result
from rubrics.grading.parts import combined_parts
from rubrics.judges.protocol import Judge, JudgeRequest, Verdict, call_judge
from rubrics.judges.usage import JudgeUsage, total_usage
from rubrics.result import GroupPlace, ItemResult, Result, TagScore

__all__ = ["LoadFailure", "Pair", "Prepared", "grade_jobs", "grade_plan", "score", "score_many"]

Progress = Callable[[int, int], None]   # (trajectories done, total)
Reward = Literal["hard", "expected"]     # what Result.reward holds: score, or expected_score


def run_code_step(step: CodeStep, trajectory) -> ItemResult:
    from rubrics.checks.registry import CheckFailure, attempt_check

    item = step.item
    base = dict(id=item.id, kind=item.kind, text=item.label or None, points=item.points, method="code",
                tags=list(item.tags))
    outcome = attempt_check(item.check, step.config, trajectory, step.spec)
    if isinstance(outcome, CheckFailure) and outcome.crashed:   # reported on the item, not hidden
        error = outcome.error
        return ItemResult(**base, status="error", evidence="",
                          error=f"internal error in check '{item.check}': {type(error).__name__}: {error}")
    if isinstance(outcome, CheckFailure):
        return ItemResult(**base, status="error", evidence="", error=f"check '{item.check}' failed: {outcome.error}")
    return ItemResult(**base, status="met" if outcome.met else "unmet", evidence=outcome.evidence)


def _impossible_probability(probability: Any) -> str | None:
    """Why a verdict's probability cannot be reported (NaN would also make the JSON output invalid)."""
    if probability is None:
        return None
    if isinstance(probability, bool) or not isinstance(probability, int | float):
        return f"the judge returned probability {probability!r}, which is not a number"
    if not 0.0 <= probability <= 1.0:   # also false for NaN
        return f"the judge returned probability {probability!r}, which is not a number in [0, 1]"
    return None


def judge_item_result(step: JudgeStep, verdict: Verdict, facts: FactsOutcome | None = None,
                      place: GroupPlace | None = None) -> ItemResult:
    """facts: the item's facts, every one found (the result's evidence then says where, before the judge's);
    place: where group grading ranked this attempt on the item (its verdict is then the group's)."""
    item = step.item
    impossible = _impossible_probability(verdict.probability)
    if impossible is not None:
        verdict = Verdict(met=None, probability=None, rationale=verdict.rationale, error=impossible)
    base = dict(id=item.id, kind=item.kind, text=item.label or None, points=item.points, method="judge",
                probability=verdict.probability, tags=list(item.tags))
    if verdict.error is not None or verdict.met is None:
        return ItemResult(**base, status="error", evidence=verdict.rationale or "",
                          error=verdict.error or "the judge returned no verdict", members=list(verdict.members) or None)
    evidence = judge_statement(step, verdict)
    said = [facts.describe() if facts is not None else None, verdict.rationale,
            place.describe() if place is not None else None]
    evidence = "; ".join([evidence, *(part for part in said if part)])
    return ItemResult(**base, status="met" if verdict.met else "unmet", evidence=evidence,
                      uncertain=in_band(verdict.probability, step.uncertain), members=list(verdict.members) or None,
                      judge_detail=verdict.detail, group=place)


JUDGE_STATEMENT = "the judge read "


def judge_statement(step: JudgeStep, verdict: Verdict) -> str:
    """What the judge saw and decided, in words: "the judge read final_answer, emails: met at 0.71 (threshold
    0.5)"; its facts, rationale and group place follow in the evidence."""
    said = f"{JUDGE_STATEMENT}{', '.join(step.evidence)}: {'met' if verdict.met else 'unmet'}"
    if verdict.probability is None:
        return said
    close = ", close to a coin" if in_band(verdict.probability, step.uncertain) else ""
    return f"{said} at {verdict.probability:.2f} (threshold {step.threshold:g}{close})"


def step_verdict(step: JudgeStep, judged: dict[str, Verdict]) -> Verdict:
    """The item's verdict from the verdicts by request id: its own, or its parts' combined."""
    if not step.parts:
        return judged[step.item.id]
    return combined_parts(step.parts, [judged[part.id] for part in step.parts])


def no_evidence_result(step: JudgeStep, missing: str) -> ItemResult:
    """A judge item with nothing to judge (every evidence selector found nothing): unmet without asking the judge,
    as a code check is when its data is missing. A penalty is then not applied; a gate fails."""
    item = step.item
    return ItemResult(id=item.id, kind=item.kind, text=item.label or None, points=item.points, method="judge",
                      tags=list(item.tags), status="unmet", evidence=f"no evidence to judge ({missing})")


def outcome(item: ItemResult) -> Outcome:
    """An evaluated item for the maths: a judge item is met with its probability (at its status when the
    verdict has none), a code check at its status."""
    met = item.status == "met"
    probability = item.probability if item.method == "judge" and item.probability is not None else float(met)
    return Outcome(kind=item.kind, points=item.points or 0, met=met, probability=probability, free=item.uncertain)


def how_sure(items: list[ItemResult], total: int) -> dict[str, float | None]:
    """expected_score, score_low and score_high; all null when an item is error, since a number computed
    without it would look complete and is not (the hard score stays partial and `complete` says so)."""
    if any(i.status == "error" for i in items):
        return dict(expected_score=None, score_low=None, score_high=None)
    outcomes = [outcome(i) for i in items]
    low, high = score_range(outcomes, total)
    return dict(expected_score=expected_score(outcomes, total), score_low=low, score_high=high)


def tag_scores(items: list[ItemResult]) -> dict[str, TagScore]:
    """Each tag's criteria scored on their own: earned over the positive points, clipped at 0."""
    scores = {}
    for tag in sorted({tag for item in items for tag in item.tags}):
        tagged = [i for i in items if tag in i.tags and i.kind == "criterion"]
        earned = sum(i.points or 0 for i in tagged if i.status == "met")
        total = sum(i.points for i in tagged if i.points and i.points > 0)
        scores[tag] = TagScore(earned=earned, total=total, score=min(1.0, max(0, earned) / total) if total else None,
                               complete=all(i.status != "error" for i in items if tag in i.tags))
    return scores


def assemble(plan: Plan, trajectory, items: list[ItemResult], judge_name: str | None,
             reward: Reward = "hard", judge_usage: JudgeUsage | None = None) -> Result:
    gates = [i for i in items if i.kind == "gate"]
    criteria = [i for i in items if i.kind == "criterion"]
    if any(i.status == "unmet" for i in gates):
        gates_passed = False
    elif any(i.status == "error" for i in gates):
        gates_passed = None
    else:
        gates_passed = True
    earned = sum(i.points or 0 for i in criteria if i.status == "met")
    total = plan.rubric.total
    score = hard_score(gates_passed is not False, earned, total)
    sure = how_sure(items, total)
    complete = all(i.status != "error" for i in items)
    return Result(trajectory_id=trajectory.id, task_id=trajectory.task_id, rubric_id=plan.rubric.id, score=score,
                  gates_passed=gates_passed, earned=earned, total=total,
                  complete=complete, items=items,
                  errors=[f"{i.id}: {i.error}" for i in items if i.status == "error"], judge=judge_name,
                  **sure, uncertain_items=sum(i.uncertain for i in items), judge_usage=judge_usage,
                  tags=tag_scores(items),
                  reward=reward_value(reward, score, sure["expected_score"], complete))


def reward_value(reward: Reward, score: float, expected: float | None, complete: bool) -> float | None:
    """What Result.reward holds: None for an incomplete result (a partial score is not a reward), else the score
    (hard) or the expected score."""
    if not complete:
        return None
    return score if reward == "hard" else expected


def failed_result(plan: Plan | RubricFailure, trajectory, reward: Reward = "hard") -> Result:
    """The Result of a trajectory that was not graded: it did not load (a LoadFailure), or its rubric is unusable."""
    errors = [trajectory.message] if isinstance(trajectory, LoadFailure) else []
    if isinstance(plan, RubricFailure):
        errors.append(plan.message)
        rubric_id, total = plan.rubric_id, 0
    else:
        rubric_id, total = plan.rubric.id, plan.rubric.total
    return Result(trajectory_id=trajectory.trajectory_id if isinstance(trajectory, LoadFailure) else trajectory.id,
                  task_id=getattr(trajectory, "task_id", None), rubric_id=rubric_id, score=0.0, gates_passed=None,
                  earned=0, total=total, complete=False, items=[], errors=errors,
                  reward=None)   # never a silent 0.0: the trajectory was not graded


class JudgeChoice:
    """The judge of each plan: the one given, else one default judge per distinct rubric judge setting (the judge
    its `judge:` section asks for: rubrics.judges.factory.JudgeSpec.from_rubric), built when first needed; None for
    a plan without judge items (then none is ever built). `built` and `lock`: where the default judges are kept
    (ascore keeps them for the process, so that its calls share one judge object and its batches)."""

    def __init__(self, judge: Judge | None, built: dict | None = None, lock: threading.Lock | None = None):
        self.given = judge
        self._built: dict = {} if built is None else built
        self._lock = lock or threading.Lock()

    def __call__(self, plan: Plan) -> Judge | None:
        if not plan.needs_judge:
            return None
        if self.given is not None:
            return self.given
        from rubrics.judges.factory import JudgeSpec, build_judge

        spec = JudgeSpec.from_rubric(plan.rubric)
        with self._lock:
            if spec not in self._built:
                self._built[spec] = build_judge(spec)
            return self._built[spec]


@dataclass
class Prepared:
    """A job with its code checks run and its judge requests built, waiting for verdicts. `code` holds the items
    decided without the judge: code checks, judge items with no evidence at all, and judge items with a missing
    fact; `facts`, the facts of the judge items sent to the judge (all found)."""
    job: Job
    judge: Judge | None
    code: dict[str, ItemResult]
    requests: list[JudgeRequest]
    facts: dict[str, FactsOutcome] = field(default_factory=dict)

    @property
    def graded(self) -> bool:
        return isinstance(self.job.plan, Plan) and not isinstance(self.job.trajectory, LoadFailure)


def prepare(job: Job, judge: Judge | None) -> Prepared:
    if isinstance(job.plan, RubricFailure) or isinstance(job.trajectory, LoadFailure):
        return Prepared(job, None, {}, [])
    plan, trajectory = job.plan, job.trajectory
    code = {s.item.id: run_code_step(s, trajectory) for s in plan.steps if isinstance(s, CodeStep)}
    requests, facts, finder = [], {}, FactFinder()
    step_of = {asked.id: s for s in plan.judge_steps for asked in s.asked}   # request id -> its item's step
    for request in plan.judge_requests(trajectory):
        step = step_of[request.item.id]
        item_id = step.item.id
        if item_id in code:   # decided on an earlier part (the parts of an item share its evidence)
            continue
        if request.context.missing:
            code[item_id] = no_evidence_result(step, request.context.missing)
            continue
        if step.facts and item_id not in facts:
            found = finder.outcome(step, request.context)
            if not found.complete:
                code[item_id] = missing_facts_result(step, found)
                continue
            facts[item_id] = found
        requests.append(request)
    return Prepared(job, judge, code, requests, facts)


def finish(prepared: Prepared, verdicts: Sequence[Verdict], reward: Reward = "hard") -> Result:
    """The job's Result from its code outcomes and its verdicts (one per request, in order)."""
    if not prepared.graded:
        return failed_result(prepared.job.plan, prepared.job.trajectory, reward)
    return finish_items(prepared, judged_items(prepared, verdicts), reward)


def judged_items(prepared: Prepared, verdicts: Sequence[Verdict]) -> dict[str, Verdict]:
    """The verdict of each judge item the job sent to the judge, by item id (an item's parts combined), from the
    verdicts of its requests (one per request, in order)."""
    judged = {request.item.id: verdict for request, verdict in zip(prepared.requests, verdicts, strict=True)}
    return {s.item.id: step_verdict(s, judged) for s in prepared.job.plan.judge_steps if s.item.id not in prepared.code}


def finish_items(prepared: Prepared, verdicts: dict[str, Verdict], reward: Reward = "hard",
                 places: dict[str, GroupPlace] | None = None) -> Result:
    """The job's Result from its code outcomes and the verdict of each judge item it sent to the judge; `places`:
    where group grading ranked the item's attempt among the others (rubrics/grading/groups.py)."""
    plan = prepared.job.plan
    places = places or {}
    items = [prepared.code[s.item.id] if s.item.id in prepared.code
             else judge_item_result(s, verdicts[s.item.id], prepared.facts.get(s.item.id), places.get(s.item.id))
             for s in plan.steps]
    usages = [v.usage for v in verdicts.values() if v.usage is not None]
    judge = prepared.judge
    judge_name = getattr(judge, "name", type(judge).__name__) if judge is not None and plan.needs_judge else None
    return assemble(plan, prepared.job.trajectory, items, judge_name, reward, total_usage(usages) if usages else None)


def judge_all(prepared: Sequence[Prepared]) -> list[list[Verdict]]:
    """Each prepared job's verdicts: every request for one judge goes to it in one call (grading/dispatch.py)."""
    calls = group_by_judge(prepared)
    return split_back(prepared, calls, [call_judge(call.judge, call.requests) for call in calls])


def grade_jobs(jobs: Sequence[Job], judges: Callable[[Plan], Judge | None], progress: Progress | None = None,
               reward: Reward = "hard") -> list[Result]:
    """One Result per job, in order. `judges` gives each plan its judge (None for a plan without judge items)."""
    prepared = [prepare(job, judges(job.plan) if isinstance(job.plan, Plan) else None) for job in jobs]
    results = []
    for index, (p, verdicts) in enumerate(zip(prepared, judge_all(prepared))):
        results.append(finish(p, verdicts, reward))
        if progress is not None:
            progress(index + 1, len(prepared))
    return results


def grade_plan(plan: Plan, trajectories: Sequence, judge: Judge | None,
               progress: Progress | None = None, reward: Reward = "hard") -> list[Result]:
    """Grade already-loaded trajectories (or LoadFailures) with a compiled plan and a resolved judge.
    `reward` picks what each Result's `reward` holds: "hard" the score, "expected" the expected score."""
    chosen = judge if plan.needs_judge else None
    return grade_jobs([Job(plan, t) for t in trajectories], lambda _: chosen, progress, reward)


def score_many(trajectories: Iterable, rubric: Any = None, judge: Judge | None = None,
               progress: Progress | None = None, *, uncertain: Band | None = None,
               reward: Reward = "hard") -> list[Result]:
    """One Result per trajectory, in input order (a .jsonl path contributes one per line).

    `rubric`: one rubric for all (path, YAML text, dict or Rubric); a list with one rubric per trajectory; or
    None when `trajectories` holds (trajectory, rubric) pairs (tuples or rubrics.Pair). Each distinct rubric is
    compiled once, and every judge request of every trajectory goes to the judge in one call. A trajectory that
    cannot be loaded, or whose rubric (given per trajectory) is unusable, gets a Result with `errors` and no
    items; one unusable rubric for all raises RubricError. `uncertain` overrides the rubrics' uncertain band."""
    jobs = make_jobs(trajectories, rubric, uncertain)
    return grade_jobs(jobs, JudgeChoice(judge), progress, reward)


def score(trajectory, rubric, judge: Judge | None = None, *, uncertain: Band | None = None,
          reward: Reward = "hard") -> Result:
    """Grade one trajectory (path, dict or Trajectory) against a rubric (path, YAML text, dict or Rubric).
    Raises TrajectoryError when the trajectory cannot be loaded."""
    from rubrics.trajectory import load_trajectory

    plan = PlanCache().plan(rubric, uncertain)
    return grade_jobs([Job(plan, load_trajectory(trajectory))], JudgeChoice(judge), reward=reward)[0]
