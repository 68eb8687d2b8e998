"""Everything the page shows, as typed objects: built here in Python, serialised once into the page as JSON, and
only laid out by the page's script (which computes filters and sorts, never figures).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict

from rubrics.judges.usage import JudgeUsage, cost, total_usage
from rubrics.result import Result
from rubrics.view.compare import Comparison
from rubrics.view.judge_eval_file import JudgeEvalView
from rubrics.view.results_file import LineProblem, ResultsFile
from rubrics.view.thresholds import JudgeBand, RubricBands, band_for
from rubrics.view.trajectories import TrajectoryView

HISTOGRAM_BINS = 10


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ResultRow(_Frozen):
    """One trajectory's line in the run table, with what the filters need precomputed."""
    index: int
    line: int
    trajectory_id: str
    task_id: str | None
    rubric_id: str
    score: float
    expected_score: float | None
    score_low: float | None
    score_high: float | None
    gates_passed: bool | None
    uncertain_items: int
    complete: bool
    tags: dict[str, float | None]
    met: list[str]
    unmet: list[str]
    errored: list[str]


class ItemRate(_Frozen):
    item_id: str
    kind: str
    text: str | None
    met: int
    unmet: int
    errored: int
    met_rate: float | None    # met / (met + unmet): items that errored are not counted either way


class HistogramBin(_Frozen):
    low: float
    high: float
    count: int


class UsageTotals(_Frozen):
    results: int                   # results that carry judge usage
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    cached_verdicts: int
    cost: float | None             # at --price-per-mtok; None without prices


class RunView(_Frozen):
    file: str
    rows: list[ResultRow]
    results: list[dict[str, Any]]                  # the results as read, for the trajectory page
    bands: list[dict[str, JudgeBand]]              # per row: its judge items' thresholds and bands
    trajectories: list[TrajectoryView | None]      # per row, when --trajectories has it
    items: list[ItemRate]
    tags: list[str]
    histogram: list[HistogramBin]
    usage: UsageTotals | None


class ViewData(_Frozen):
    title: str
    run: RunView | None
    other: RunView | None                          # the --compare run
    comparison: Comparison | None
    judge_eval: JudgeEvalView | None
    problems: list[LineProblem]
    notes: list[str]                               # trajectories that did not load, and the like


def build_run(loaded: ResultsFile, bands: RubricBands, trajectories: list[TrajectoryView | None],
              prices: tuple[float, float] | None) -> RunView:
    results = loaded.results
    return RunView(file=loaded.path, rows=[_row(i, loaded.lines[i], r) for i, r in enumerate(results)],
                   results=[r.to_dict() for r in results],
                   bands=[{item.id: band_for(r.rubric_id, item, bands) for item in r.items if item.method == "judge"}
                          for r in results],
                   trajectories=trajectories, items=item_rates(results),
                   tags=sorted({t for r in results for t in r.tags} | {t for r in results for i in r.items
                                                                         for t in i.tags}),
                   histogram=histogram([r.score for r in results]), usage=usage_totals(results, prices))


def _row(index: int, line: int, r: Result) -> ResultRow:
    return ResultRow(index=index, line=line, trajectory_id=r.trajectory_id, task_id=r.task_id, rubric_id=r.rubric_id,
                     score=r.score, expected_score=r.expected_score, score_low=r.score_low, score_high=r.score_high,
                     gates_passed=r.gates_passed, uncertain_items=r.uncertain_items, complete=r.complete,
                     tags={name: tag.score for name, tag in r.tags.items()},
                     met=[i.id for i in r.items if i.status == "met"],
                     unmet=[i.id for i in r.items if i.status == "unmet"],
                     errored=[i.id for i in r.items if i.status == "error"])


def item_rates(results: list[Result]) -> list[ItemRate]:
    counts: dict[str, Counter] = {}
    first: dict[str, Any] = {}
    for r in results:
        for item in r.items:
            counts.setdefault(item.id, Counter())[item.status] += 1
            first.setdefault(item.id, item)
    out = []
    for item_id, c in counts.items():
        decided = c["met"] + c["unmet"]
        out.append(ItemRate(item_id=item_id, kind=first[item_id].kind, text=first[item_id].text, met=c["met"],
                            unmet=c["unmet"], errored=c["error"], met_rate=c["met"] / decided if decided else None))
    return out


def histogram(scores: list[float], bins: int = HISTOGRAM_BINS) -> list[HistogramBin]:
    counts = [0] * bins
    for s in scores:
        counts[min(int(s * bins), bins - 1)] += 1   # a score of 1.0 belongs to the last bin
    return [HistogramBin(low=b / bins, high=(b + 1) / bins, count=counts[b]) for b in range(bins)]


def usage_totals(results: list[Result], prices: tuple[float, float] | None) -> UsageTotals | None:
    carrying = [r.judge_usage for r in results if r.judge_usage is not None]
    if not carrying:
        return None
    total: JudgeUsage = total_usage(carrying)
    return UsageTotals(results=len(carrying), prompt_tokens=total.prompt_tokens, cached_tokens=total.cached_tokens,
                       completion_tokens=total.completion_tokens, cached_verdicts=total.cached_verdicts,
                       cost=cost(total, *prices) if prices else None)
