"""Throughput of concurrent `rubrics.ascore` calls against one `score_many` batch and sequential `score` calls.

    python benchmarks/async_grading.py [--trajectories 64] [--judge-items 5] [--threads 2] [--window-ms 50] [--rounds 1]
                                       [--arrival-ms 40]

The same N CFO trajectories (each made distinct, so no prompt repeats whole) are graded three ways with the
embedded judge, each on a fresh engine (so no mode reuses another's prefix cache), the model loaded before the
clock starts:

1. score_many: one call, every judge request in one engine batch (the reference);
2. ascore: N coroutines started together with asyncio.gather, one trajectory each; the JudgeBatcher joins the
   requests that arrive within its window into one engine batch (target: throughput within 20% of 1);
3. score: N calls one after the other, one engine batch of one trajectory each;
4. staggered ascore, joined: the N callers arrive one every --arrival-ms (as rollouts finish in a trainer); the
   judge takes several calls at once, so a batch that forms while another runs joins it in the engine, step by
   step (continuous batching across callers);
5. staggered ascore, one call at a time: the same arrivals, the judge held to one call at a time (a batch that
   forms while another runs waits for it to end), the behaviour before callers could join a running batch.

Prints judgments per second of each, the ratios, how many engine calls each made, for 4 and 5 each caller's
latency (arrival to result: mean and 90th percentile), whether all five agree on every verdict, and the
machine's load average (uptime) before and after: the figures move with the load.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import time

from grade_throughput import RUBRIC, distinct_trajectories  # benchmarks/ is on sys.path when run as a script


class CountingJudge:
    """Counts the engine calls of a judge; takes as many calls at once as the judge does, or `concurrent_calls`."""

    def __init__(self, inner, concurrent_calls: int | None = None):
        import threading

        self.inner = inner
        self.name = inner.name
        self.concurrent_calls = concurrent_calls or inner.concurrent_calls
        self.calls = 0
        self._lock = threading.Lock()

    def judge(self, requests):
        with self._lock:
            self.calls += 1
        return self.inner.judge(requests)


def fresh_judge(concurrent_calls: int | None = None) -> CountingJudge:
    from rubrics.judges.backends.embedded import EmbeddedJudge

    judge = EmbeddedJudge()
    judge.builder   # loads the engine, weights and tokenizer before the clock starts
    return CountingJudge(judge, concurrent_calls)


def run_many(trajectories, rubric):
    import rubrics

    judge = fresh_judge()
    started = time.perf_counter()
    results = rubrics.score_many(trajectories, rubric, judge=judge)
    return time.perf_counter() - started, results, judge.calls


def run_async(trajectories, rubric, window_ms: float):
    import rubrics
    from rubrics.grading.batching import JudgeBatcher

    judge = fresh_judge()
    batcher = JudgeBatcher(judge, window_ms=window_ms)

    async def main():
        return await asyncio.gather(*(rubrics.ascore(t, rubric, batcher=batcher) for t in trajectories))

    started = time.perf_counter()
    results = asyncio.run(main())
    seconds = time.perf_counter() - started
    batcher.close()
    return seconds, results, judge.calls


def run_staggered(trajectories, rubric, window_ms: float, arrival_ms: float, concurrent_calls: int | None):
    """Callers arriving one every arrival_ms; returns (seconds, results, calls, latencies in seconds)."""
    import rubrics
    from rubrics.grading.batching import JudgeBatcher

    judge = fresh_judge(concurrent_calls)
    batcher = JudgeBatcher(judge, window_ms=window_ms)
    latencies: list[float] = []

    async def caller(index, trajectory):
        await asyncio.sleep(index * arrival_ms / 1000.0)
        arrived = time.perf_counter()
        result = await rubrics.ascore(trajectory, rubric, batcher=batcher)
        latencies.append(time.perf_counter() - arrived)
        return result

    async def main():
        return await asyncio.gather(*(caller(i, t) for i, t in enumerate(trajectories)))

    started = time.perf_counter()
    results = asyncio.run(main())
    seconds = time.perf_counter() - started
    batcher.close()
    return seconds, results, judge.calls, latencies


def run_sequential(trajectories, rubric):
    import rubrics

    judge = fresh_judge()
    started = time.perf_counter()
    results = [rubrics.score(t, rubric, judge=judge) for t in trajectories]
    return time.perf_counter() - started, results, judge.calls


def verdicts(results) -> list[tuple]:
    return [(r.trajectory_id, i.id, i.status, round(i.probability or 0.0, 4)) for r in results for i in r.items]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trajectories", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--window-ms", type=float, default=50.0, help="the JudgeBatcher's window")
    parser.add_argument("--arrival-ms", type=float, default=40.0,
                        help="staggered modes: one caller arrives every this many ms")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the three modes this many times, alternating; the fastest round of each counts "
                             "(other tenants of a shared machine slow some rounds down)")
    parser.add_argument("--judge-items", type=int, default=None,
                        help="keep only the first N judge items of the CFO rubric (a loaded machine: fewer judgments)")
    args = parser.parse_args()

    import torch

    import rubrics

    torch.set_num_threads(args.threads)
    rubric = rubrics.load_rubric(RUBRIC)
    if args.judge_items is not None:
        judged = [item.id for item in rubric.items if item.is_judge][: args.judge_items]
        rubric = rubric.model_copy(update={
            "gates": tuple(i for i in rubric.gates if not i.is_judge or i.id in judged),
            "criteria": tuple(i for i in rubric.criteria if not i.is_judge or i.id in judged)})
    trajectories = distinct_trajectories(args.trajectories, "async")
    print(f"before: {load()}")
    figures: dict[str, float] = {}
    waits: dict[str, tuple[float, float]] = {}   # staggered modes: best (mean, p90) latency over the rounds
    outputs = {}
    modes = (("score_many", lambda: run_many(trajectories, rubric)),
             ("ascore x N", lambda: run_async(trajectories, rubric, args.window_ms)),
             ("score x N", lambda: run_sequential(trajectories, rubric)),
             ("staggered, joined", lambda: run_staggered(trajectories, rubric, args.window_ms, args.arrival_ms,
                                                         None)),
             ("staggered, one call at a time", lambda: run_staggered(trajectories, rubric, args.window_ms,
                                                                     args.arrival_ms, 1)))
    for round_ in range(1, args.rounds + 1):
        for label, run in modes:
            seconds, results, calls, *latencies = run()
            judged = sum(1 for r in results for i in r.items if i.method == "judge" and i.status != "error")
            figures[label] = max(figures.get(label, 0.0), judged / seconds)
            outputs[label] = results
            waited = ""
            if latencies:
                ordered = sorted(latencies[0])
                mean, p90 = sum(ordered) / len(ordered), ordered[int(0.9 * (len(ordered) - 1))]
                waits[label] = min(waits.get(label, (mean, p90)), (mean, p90))
                waited = f", caller latency mean {mean:.2f}s p90 {p90:.2f}s"
            print(f"round {round_}: {label}: {len(results)} trajectories, {judged} judgments in {seconds:.1f}s = "
                  f"{judged / seconds:.2f} judgments/s, {calls} engine call(s){waited}; {load()}", flush=True)
    print(f"after: {load()}")
    print(f"fastest round of {args.rounds}: " + ", ".join(f"{k} {v:.2f} judgments/s" for k, v in figures.items()))
    print(f"ascore / score_many: x{figures['ascore x N'] / figures['score_many']:.2f} (target >= 0.80)")
    print(f"ascore / sequential score: x{figures['ascore x N'] / figures['score x N']:.2f}")
    print(f"score_many / sequential score: x{figures['score_many'] / figures['score x N']:.2f}")
    joined, serial = waits["staggered, joined"], waits["staggered, one call at a time"]
    print(f"staggered arrivals (one every {args.arrival_ms:g} ms), best round: joined mean latency {joined[0]:.2f}s "
          f"(p90 {joined[1]:.2f}s) vs one call at a time {serial[0]:.2f}s (p90 {serial[1]:.2f}s): "
          f"x{serial[0] / joined[0]:.2f} shorter mean wait; throughput "
          f"x{figures['staggered, joined'] / figures['staggered, one call at a time']:.2f}")
    reference = verdicts(outputs["score_many"])
    same = {label: verdicts(results) == reference for label, results in outputs.items()}
    print("same verdicts and probabilities (4 decimals) as score_many: "
          + ", ".join(f"{label}: {'yes' if ok else 'NO'}" for label, ok in same.items()))


if __name__ == "__main__":
    main()
