"""JudgeBatcher: judge requests submitted by many callers (coroutines or threads) within a short window go to the
judge in one call, and each caller gets back the verdicts of its own requests.

An engine judges a batch of N prompts far faster than N batches of one (the instructions prefix is computed
once, the forward passes are batched), so grading from many concurrent callers should cost about what one
score_many over the same trajectories costs. A worker thread collects submissions: the first one opens a window
of `window_ms` that each new submission extends (callers preparing one after another on an event loop keep
joining), up to `max_wait_ms` after the first; the batch goes out when the window closes or `max_batch`
requests are waiting.

A judge that takes several calls at once (`concurrent_calls`, rubrics.judges.protocol) gets up to that many
batches in flight: the embedded judge's engine then schedules a batch that arrives while another runs next to it,
step by step (continuous batching across callers), so a caller arriving late waits for its own prompts, not for
the whole batch before it. When every call slot is busy, new submissions queue up and go out together as soon as
one frees. Any other judge gets one call at a time.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Sequence

from rubrics.judges.protocol import Judge, JudgeRequest, call_judge, concurrent_calls

# A judge call takes seconds: waiting 50 ms for more callers costs little, and callers that prepare one after
# another on a busy event loop (a few ms each, more on a loaded machine) still land in one batch.
DEFAULT_WINDOW_MS = 50.0
DEFAULT_MAX_WAIT_MS = 500.0
DEFAULT_MAX_BATCH = 1024
IDLE_EXIT_S = 30.0   # the worker thread ends after this long without work; the next submit starts another


@dataclass
class _Submission:
    requests: list[JudgeRequest]
    future: Future
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class BatcherStats:
    judge_calls: int = 0      # calls to the judge (a failed batch retried caller by caller counts each call)
    submissions: int = 0
    requests: int = 0
    largest_batch: int = 0    # requests in the largest call
    peak_calls_in_flight: int = 0


class JudgeBatcher:
    """Joins the requests of concurrent callers into one judge call. `submit` returns a concurrent Future of the
    caller's verdicts (same order and length as its requests); `rubrics.ascore` awaits it."""

    def __init__(self, judge: Judge, window_ms: float = DEFAULT_WINDOW_MS, max_batch: int = DEFAULT_MAX_BATCH,
                 max_wait_ms: float = DEFAULT_MAX_WAIT_MS):
        if not window_ms >= 0 or not max_wait_ms >= window_ms:   # also false for NaN
            raise ValueError(f"expected 0 <= window_ms <= max_wait_ms, got {window_ms!r} and {max_wait_ms!r}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch!r}")
        self.judge = judge
        self.window_s = window_ms / 1000.0
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_batch = max_batch
        self.stats = BatcherStats()
        self.max_calls = concurrent_calls(judge)
        self._call_slots = threading.Semaphore(self.max_calls)
        self._calls: set[threading.Thread] = set()   # judge calls in flight on their own threads
        self._pending: list[_Submission] = []
        self._waiting = 0   # requests in _pending
        self._wake = threading.Condition()
        self._worker: threading.Thread | None = None
        self._closed = False

    def submit(self, requests: Sequence[JudgeRequest]) -> Future:
        future: Future = Future()
        requests = list(requests)
        if not requests:
            future.set_result([])
            return future
        with self._wake:
            if self._closed:
                raise RuntimeError("this JudgeBatcher is closed")
            self._pending.append(_Submission(requests, future))
            self._waiting += len(requests)
            self.stats.submissions += 1
            self.stats.requests += len(requests)
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="rubrics-judge-batcher", daemon=True)
                self._worker.start()
            self._wake.notify()
        return future

    def close(self, wait: bool = True) -> None:
        """Judges what is waiting, then stops the worker (waiting for it with wait=True); later submits raise."""
        with self._wake:
            self._closed = True
            worker = self._worker
            self._wake.notify()
        if wait and worker is not None and worker is not threading.current_thread():
            worker.join()
        if wait:
            with self._wake:
                calls = list(self._calls)
            for call in calls:
                call.join()

    def _take(self) -> list[_Submission] | None:
        """The next batch, waiting for its window; None when idle for IDLE_EXIT_S (the worker then ends)."""
        with self._wake:
            while not self._pending:
                if self._closed or not self._wake.wait(IDLE_EXIT_S) and not self._pending:
                    self._worker = None
                    return None
            cap = self._pending[0].arrived + self.max_wait_s
            while self._waiting < self.max_batch and not self._closed:
                left = min(cap, self._pending[-1].arrived + self.window_s) - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(left)
            batch, size = [], 0
            # whole submissions only (a caller's requests stay together); the first goes even if it is large
            while self._pending and (not batch or size + len(self._pending[0].requests) <= self.max_batch):
                submission = self._pending.pop(0)
                batch.append(submission)
                size += len(submission.requests)
            self._waiting -= size
            return batch

    def _run(self) -> None:
        while True:
            self._call_slots.acquire()   # a free call slot first: while all are busy, submissions pile up
            batch = self._take()
            if batch is None:
                self._call_slots.release()
                return
            call = threading.Thread(target=self._judge_and_release, args=(batch,), name="rubrics-judge-call",
                                    daemon=True)
            with self._wake:
                self._calls.add(call)
                self.stats.peak_calls_in_flight = max(self.stats.peak_calls_in_flight, len(self._calls))
            call.start()

    def _judge_and_release(self, batch: list[_Submission]) -> None:
        try:
            self._judge(batch)
        finally:
            with self._wake:
                self._calls.discard(threading.current_thread())
            self._call_slots.release()

    def _judge(self, batch: list[_Submission]) -> None:
        requests = [r for s in batch for r in s.requests]
        with self._wake:
            self.stats.judge_calls += 1
            self.stats.largest_batch = max(self.stats.largest_batch, len(requests))
        try:
            verdicts = list(self.judge.judge(requests))
            if len(verdicts) != len(requests):
                raise ValueError(f"judge returned {len(verdicts)} verdicts for {len(requests)} requests")
        except Exception:
            # One caller's request may be what broke the judge: each caller is judged alone, so the others still
            # get verdicts and the culprit gets its error verdicts (call_judge never raises).
            for submission in batch:
                if len(batch) > 1:
                    with self._wake:
                        self.stats.judge_calls += 1
                self._deliver(submission, lambda s=submission: call_judge(self.judge, s.requests))
            return
        answers = iter(verdicts)
        for submission in batch:
            chunk = [next(answers) for _ in submission.requests]
            self._deliver(submission, lambda chunk=chunk: chunk)

    @staticmethod
    def _deliver(submission: _Submission, verdicts) -> None:
        if submission.future.set_running_or_notify_cancel():   # False: the caller cancelled; nothing to send
            try:
                submission.future.set_result(verdicts())
            except BaseException as exc:   # deliver, never kill the worker: the caller sees what went wrong
                submission.future.set_exception(exc)


_BATCHERS: dict[int, JudgeBatcher] = {}
_BATCHERS_LOCK = threading.Lock()
MAX_SHARED_BATCHERS = 64


def shared_batcher(judge: Judge, window_ms: float = DEFAULT_WINDOW_MS, max_batch: int = DEFAULT_MAX_BATCH,
                   max_wait_ms: float = DEFAULT_MAX_WAIT_MS) -> JudgeBatcher:
    """The process-wide batcher of `judge`: every ascore call with the same judge object joins its batches.
    The window and size of the first call that made it stay."""
    with _BATCHERS_LOCK:
        batcher = _BATCHERS.get(id(judge))
        if batcher is None or batcher.judge is not judge:
            if len(_BATCHERS) >= MAX_SHARED_BATCHERS:   # bounded: the oldest is closed (it finishes its work)
                _BATCHERS.pop(next(iter(_BATCHERS))).close(wait=False)
            batcher = _BATCHERS[id(judge)] = JudgeBatcher(judge, window_ms, max_batch, max_wait_ms)
        return batcher
