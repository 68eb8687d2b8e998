"""Plan + trajectories + judge -> Results: score = 0 when a gate fails, else min(1, max(0, earned) / total).

Each Result also says how sure it is (rubrics/expectation.py): the expected score over the judge's
probabilities, and the range of scores over the items whose probability lies in their uncertain band.

Every judge request of every trajectory goes to the judge in one call, so the engine can batch them
and share prompt prefixes. Whatever goes wrong with one trajectory or one item (a trajectory that
will not load, a check that fails, a judge that errors) is reported on that trajectory or item only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Literal, Sequence

from rubrics.compiler import CodeStep, JudgeStep, Plan, compile_rubric
from rubrics.expectation import Band, Outcome, expected_score, hard_score, in_band, score_range
from rubrics.judges.protocol import Judge, Verdict, call_judge
from rubrics.judges.usage import JudgeUsage, total_usage
from rubrics.result import ItemResult, Result

Progress = Callable[[int, int], None]   # (trajectories done, total)
Reward = Literal["hard", "expected"]     # what Result.reward holds: score, or expected_score


@dataclass(frozen=True)
class LoadFailure:
    trajectory_id: str
    message: str


def _load(src: Any, index: int):
    from rubrics.trajectory import Trajectory, load_trajectory

    if isinstance(src, Trajectory):
        return src
    if isinstance(src, Exception):   # e.g. a TrajectoryLoadError yielded by iter_trajectory_file
        return LoadFailure(getattr(src, "source", None) or f"#{index}", str(src))
    try:
        return load_trajectory(src)
    except (ValueError, OSError, TypeError) as exc:
        name = str(src) if isinstance(src, (str, bytes)) or hasattr(src, "__fspath__") else None
        if name is None and isinstance(src, dict) and isinstance(src.get("id"), str):
            name = src["id"]
        return LoadFailure(name or f"#{index}", f"cannot load the trajectory: {exc}")


def run_code_step(step: CodeStep, trajectory) -> ItemResult:
    from rubrics.checks.base import CheckError

    item = step.item
    base = dict(id=item.id, kind=item.kind, text=item.label or None, points=item.points, method="code")
    try:
        outcome = step.spec.run(step.config, trajectory)
    except CheckError as exc:
        return ItemResult(**base, status="error", evidence="", error=f"check '{item.check}' failed: {exc}")
    except Exception as exc:  # a bug in one check must not sink the batch; it is reported, not hidden
        return ItemResult(**base, status="error", evidence="",
                          error=f"internal error in check '{item.check}': {type(exc).__name__}: {exc}")
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


def judge_item_result(step: JudgeStep, verdict: Verdict) -> ItemResult:
    item = step.item
    impossible = _impossible_probability(verdict.probability)
    if impossible is not None:
        verdict = Verdict(met=None, probability=None, rationale=verdict.rationale, error=impossible)
    base = dict(id=item.id, kind=item.kind, text=item.label or None, points=item.points, method="judge",
                probability=verdict.probability)
    if verdict.error is not None or verdict.met is None:
        return ItemResult(**base, status="error", evidence=verdict.rationale or "",
                          error=verdict.error or "the judge returned no verdict", members=list(verdict.members) or None)
    evidence = verdict.rationale or (f"judge probability {verdict.probability:.3f} (threshold {step.threshold})"
                                     if verdict.probability is not None else "judge verdict")
    return ItemResult(**base, status="met" if verdict.met else "unmet", evidence=evidence,
                      uncertain=in_band(verdict.probability, step.uncertain), members=list(verdict.members) or None)


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
                  reward=reward_value(reward, score, sure["expected_score"], complete))


def reward_value(reward: Reward, score: float, expected: float | None, complete: bool) -> float | None:
    """What Result.reward holds: None for an incomplete result (a partial score is not a reward), else the score
    (hard) or the expected score."""
    if not complete:
        return None
    return score if reward == "hard" else expected


def failed_result(plan: Plan, failure: LoadFailure, reward: Reward = "hard") -> Result:
    return Result(trajectory_id=failure.trajectory_id, rubric_id=plan.rubric.id, score=0.0, gates_passed=None,
                  earned=0, total=plan.rubric.total, complete=False, items=[], errors=[failure.message],
                  reward=None)   # never a silent 0.0: the trajectory was not graded


def resolve_judge(judge: Judge | None, plan: Plan) -> Judge | None:
    """The judge to use; None when the rubric has no judge item (then none is ever constructed). Without a judge
    given: the rubric's `judge: {panel: ...}` when it has one, else the embedded judge; either with the rubric's
    `judge: {calibration: PATH}` (which calibrates the judge built here, not one passed in)."""
    if not plan.needs_judge:
        return None
    if judge is not None:
        return judge
    from rubrics.judges.calibration_file import rubric_calibration_path
    from rubrics.judges.extras import make_embedded_judge

    calibration = rubric_calibration_path(plan.rubric)
    panel = plan.rubric.judge.panel if plan.rubric.judge is not None else None
    if panel is not None:
        from rubrics.judges.panel_members import build_panel, parse_member

        return build_panel([parse_member(m) for m in panel.members], panel.combine, calibration=calibration)
    return make_embedded_judge(**({"calibration": calibration} if calibration else {}))


def grade_plan(plan: Plan, trajectories: Sequence, judge: Judge | None,
               progress: Progress | None = None, reward: Reward = "hard") -> list[Result]:
    """Grade already-loaded trajectories (or LoadFailures) with a compiled plan and a resolved judge.
    `reward` picks what each Result's `reward` holds: "hard" the score, "expected" the expected score."""
    code_items: list[dict[str, ItemResult]] = []
    requests, owners = [], []
    for index, trajectory in enumerate(trajectories):
        if isinstance(trajectory, LoadFailure):
            code_items.append({})
            continue
        code_items.append({s.item.id: run_code_step(s, trajectory) for s in plan.steps if isinstance(s, CodeStep)})
        for request in plan.judge_requests(trajectory):
            requests.append(request)
            owners.append(index)
    verdicts = call_judge(judge, requests) if requests else []
    judged: list[dict[str, Verdict]] = [{} for _ in trajectories]
    for owner, request, verdict in zip(owners, requests, verdicts):
        judged[owner][request.item.id] = verdict
    judge_name = getattr(judge, "name", type(judge).__name__) if judge is not None and plan.needs_judge else None
    results = []
    for index, trajectory in enumerate(trajectories):
        if isinstance(trajectory, LoadFailure):
            results.append(failed_result(plan, trajectory, reward))
        else:
            items = [code_items[index][s.item.id] if isinstance(s, CodeStep)
                     else judge_item_result(s, judged[index][s.item.id]) for s in plan.steps]
            usages = [v.usage for v in judged[index].values() if v.usage is not None]
            results.append(assemble(plan, trajectory, items, judge_name, reward,
                                    total_usage(usages) if usages else None))
        if progress is not None:
            progress(index + 1, len(trajectories))
    return results


def _expand(sources: Iterable) -> Iterator:
    """Each input as it is, except trajectory files: every trajectory of a .json/.jsonl file, in order
    (a bad line becomes a TrajectoryLoadError value, which grades as a load failure)."""
    from pathlib import Path

    from rubrics.trajectory import iter_trajectory_file

    for src in sources:
        if isinstance(src, Path) or (isinstance(src, str) and src.endswith((".json", ".jsonl"))
                                     and "\n" not in src and Path(src).is_file()):
            yield from iter_trajectory_file(src)
        else:
            yield src


def score_many(trajectories: Iterable, rubric, judge: Judge | None = None, progress: Progress | None = None,
               *, uncertain: Band | None = None, reward: Reward = "hard") -> list[Result]:
    """One Result per trajectory, in input order (a .jsonl path contributes one per line). Every judge
    request of every trajectory goes to the judge in one call. A trajectory that cannot be loaded gets a
    Result with `errors` and no items. `uncertain` overrides the rubric's uncertain band (as --uncertain)."""
    from rubrics.loading import load_rubric

    plan = compile_rubric(load_rubric(rubric), uncertain)
    loaded = [_load(src, i) for i, src in enumerate(_expand(trajectories))]
    return grade_plan(plan, loaded, resolve_judge(judge, plan), progress, reward)


def score(trajectory, rubric, judge: Judge | None = None, *, uncertain: Band | None = None,
          reward: Reward = "hard") -> Result:
    """Grade one trajectory (path, dict or Trajectory) against a rubric (path, YAML text, dict or Rubric).
    Raises TrajectoryError when the trajectory cannot be loaded."""
    from rubrics.loading import load_rubric
    from rubrics.trajectory import load_trajectory

    plan = compile_rubric(load_rubric(rubric), uncertain)
    return grade_plan(plan, [load_trajectory(trajectory)], resolve_judge(judge, plan), reward=reward)[0]
