"""rubrics.ascore / ascore_many and the JudgeBatcher: concurrent callers share judge calls, each gets its own
results, and one caller's failure stays its own."""
import asyncio
import threading

import pytest
from rubric_fakes import ScriptedJudge, trajectory, yaml_text

import rubrics
from rubrics.grading.batching import JudgeBatcher
from rubrics.judges import Verdict
from rubrics.trajectory import TrajectoryError

RUBRIC = yaml_text("""
    version: 1
    id: r
    task: t
    gates:
      - {id: g, contains: {text: GATE}}
    criteria:
      - {id: clear, points: 2, judge: the answer is clear}
      - {id: kind, points: 1, judge: the answer is kind}
""")


def by_evidence(request):
    """Met when the trajectory's answer says YES: a verdict sent to the wrong caller would show."""
    return Verdict(met="YES" in request.context.evidence[0].text, probability=0.9)


class LockedJudge(ScriptedJudge):
    """Records, under a lock, how many judge calls overlap (the batcher must never make two at once)."""

    def __init__(self, decide=by_evidence):
        super().__init__(decide)
        self.active = 0
        self.overlap = False
        self.lock = threading.Lock()

    def judge(self, requests):
        with self.lock:
            self.active += 1
            self.overlap |= self.active > 1
        try:
            return super().judge(requests)
        finally:
            with self.lock:
                self.active -= 1


def answers(n):
    return [trajectory(f"GATE {'YES' if i % 3 else 'no'} {i}", id=f"t{i}") for i in range(n)]


def test_concurrent_coroutines_join_one_judge_call_and_get_their_own_results():
    judge = LockedJudge()
    batcher = JudgeBatcher(judge, window_ms=1000, max_batch=40, max_wait_ms=5000)   # 20 callers x 2 requests

    async def main():
        return await asyncio.gather(*(rubrics.ascore(t, RUBRIC, batcher=batcher) for t in answers(20)))

    results = asyncio.run(main())
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 40
    expected = rubrics.score_many(answers(20), RUBRIC, judge=ScriptedJudge(by_evidence))
    assert [r.to_dict() for r in results] == [r.to_dict() for r in expected]
    assert {r.score for r in results} == {0.0, 1.0} and all(r.judge == "scripted" for r in results)
    assert batcher.stats.judge_calls == 1 and batcher.stats.submissions == 20


def test_threads_each_with_their_own_event_loop_share_a_batch():
    judge = LockedJudge()
    batcher = JudgeBatcher(judge, window_ms=1000, max_batch=16, max_wait_ms=5000)   # 8 threads x 2 requests
    results = {}

    def worker(index, traj):
        results[index] = asyncio.run(rubrics.ascore(traj, RUBRIC, batcher=batcher))

    threads = [threading.Thread(target=worker, args=(i, t)) for i, t in enumerate(answers(8))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(judge.calls) == 1 and not judge.overlap
    assert [results[i].trajectory_id for i in range(8)] == [f"t{i}" for i in range(8)]
    assert [results[i].earned for i in range(8)] == [0 if i % 3 == 0 else 3 for i in range(8)]


def test_max_batch_splits_between_callers_and_calls_never_overlap():
    judge = LockedJudge()
    batcher = JudgeBatcher(judge, window_ms=1000, max_batch=4, max_wait_ms=5000)

    async def main():
        return await asyncio.gather(*(rubrics.ascore(t, RUBRIC, batcher=batcher) for t in answers(6)))

    results = asyncio.run(main())
    assert [len(call) for call in judge.calls] == [4, 4, 4] and not judge.overlap
    assert [r.trajectory_id for r in results] == [f"t{i}" for i in range(6)]


def test_a_request_that_breaks_the_judge_fails_only_its_caller():
    def decide(request):
        if "POISON" in request.context.evidence[0].text:
            raise RuntimeError("cannot parse this one")
        return by_evidence(request)

    judge = ScriptedJudge(decide)
    batcher = JudgeBatcher(judge, window_ms=1000, max_batch=6, max_wait_ms=5000)
    trajs = [trajectory("GATE YES", id="a"), trajectory("GATE POISON", id="p"), trajectory("GATE YES", id="b")]

    async def main():
        return await asyncio.gather(*(rubrics.ascore(t, RUBRIC, batcher=batcher) for t in trajs))

    good, poisoned, other = asyncio.run(main())
    assert good.complete and other.complete and good.reward == other.reward == 1.0
    assert not poisoned.complete and poisoned.reward is None
    assert all("cannot parse this one" in i.error for i in poisoned.items if i.method == "judge")
    assert [len(call) for call in judge.calls] == [6, 2, 2, 2]   # the batch, then each caller alone


def test_a_cancelled_caller_does_not_disturb_the_others():
    judge = ScriptedJudge(by_evidence)
    batcher = JudgeBatcher(judge, window_ms=1000, max_batch=4, max_wait_ms=5000)
    trajs = answers(2)
    from rubrics.grading.jobs import PlanCache

    plan = PlanCache().plan(RUBRIC)
    loaded = rubrics.load_trajectory(trajs[0])
    cancelled = batcher.submit(plan.judge_requests(loaded))
    assert cancelled.cancel()
    result = asyncio.run(rubrics.ascore(trajs[1], RUBRIC, batcher=batcher))
    assert result.complete and result.trajectory_id == "t1"
    assert [len(call) for call in judge.calls] == [4]   # the cancelled requests were judged, their answer dropped


def test_ascore_many_takes_pairs_and_matches_score_many():
    other = RUBRIC.replace("id: r\n", "id: r2\n")
    pairs = [(t, RUBRIC if i % 2 else other) for i, t in enumerate(answers(5))]
    judge = ScriptedJudge(by_evidence)
    got = asyncio.run(rubrics.ascore_many(pairs, judge=judge))
    want = rubrics.score_many(pairs, judge=ScriptedJudge(by_evidence))
    assert [r.to_dict() for r in got] == [r.to_dict() for r in want] and len(judge.calls) == 1


def test_ascore_raises_like_score_and_code_only_rubrics_need_no_judge():
    with pytest.raises(TrajectoryError):
        asyncio.run(rubrics.ascore({"id": "x", "messages": 3}, RUBRIC, judge=ScriptedJudge()))
    code_only = yaml_text("""
        version: 1
        id: code
        task: t
        criteria:
          - {id: c, points: 1, contains: {text: GATE}}
    """)
    result = asyncio.run(rubrics.ascore(trajectory("GATE"), code_only))   # judge=None builds no judge here
    assert result.reward == 1.0 and result.judge is None


def test_batcher_options_are_checked():
    with pytest.raises(ValueError):
        JudgeBatcher(ScriptedJudge(), window_ms=-1)
    with pytest.raises(ValueError):
        JudgeBatcher(ScriptedJudge(), max_batch=0)
    with pytest.raises(ValueError):
        JudgeBatcher(ScriptedJudge(), window_ms=10, max_wait_ms=5)


class OverlappingJudge(ScriptedJudge):
    """Says it takes `slots` calls at once; its first call holds until a second call has started (or 10 s)."""

    def __init__(self, slots):
        super().__init__(by_evidence)
        self.concurrent_calls = slots
        self.first_entered = threading.Event()
        self.second_entered = threading.Event()
        self.first_saw_second = None
        self.lock = threading.Lock()
        self.active = self.peak = 0

    def judge(self, requests):
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            first = not self.first_entered.is_set()
            (self.first_entered if first else self.second_entered).set()
        try:
            if first:
                self.first_saw_second = self.second_entered.wait(10)
            return super().judge(requests)
        finally:
            with self.lock:
                self.active -= 1


def test_a_judge_taking_concurrent_calls_gets_a_late_batch_while_the_first_runs():
    judge = OverlappingJudge(slots=2)
    batcher = JudgeBatcher(judge, window_ms=0, max_wait_ms=0)
    early, late = answers(2)
    results = {}
    thread = threading.Thread(target=lambda: results.setdefault(
        "early", asyncio.run(rubrics.ascore(early, RUBRIC, batcher=batcher))))
    thread.start()
    assert judge.first_entered.wait(10)
    results["late"] = asyncio.run(rubrics.ascore(late, RUBRIC, batcher=batcher))
    thread.join(30)
    assert judge.first_saw_second is True and judge.peak == 2 and batcher.stats.peak_calls_in_flight == 2
    assert [results["early"].trajectory_id, results["late"].trajectory_id] == ["t0", "t1"]
    assert [results["early"].earned, results["late"].earned] == [0, 3]


def test_no_more_calls_in_flight_than_the_judge_takes():
    judge = OverlappingJudge(slots=2)
    batcher = JudgeBatcher(judge, window_ms=0, max_wait_ms=0)
    threads = [threading.Thread(target=lambda t=t: asyncio.run(rubrics.ascore(t, RUBRIC, batcher=batcher)))
               for t in answers(6)]
    for thread in threads:
        thread.start()
        judge.first_entered.wait(10)
    for thread in threads:
        thread.join(30)
    assert judge.peak == 2 and batcher.stats.peak_calls_in_flight == 2
    assert sum(map(len, judge.calls)) == 12
    batcher.close()


def test_a_judge_that_says_nothing_is_called_once_at_a_time():
    from rubrics.judges.protocol import concurrent_calls

    assert concurrent_calls(LockedJudge()) == 1
    for odd in (0, -3, True, 2.5, "4"):
        judge = LockedJudge()
        judge.concurrent_calls = odd
        assert concurrent_calls(judge) == 1
    assert concurrent_calls(rubrics.EmbeddedJudge()) > 1
