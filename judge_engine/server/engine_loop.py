"""One thread drives one engine; HTTP handlers talk to it through an inbox and per-request queues.

The engine is not thread-safe and its step() blocks on the model, so it lives in one thread of its own. Handlers
(on the asyncio loop) post add/abort commands to the inbox; the thread applies them between steps, which is what
makes a request that arrives mid-generation join the running batch (continuous batching across clients). Each
step's outputs are handed back to the waiting handler's asyncio queue with call_soon_threadsafe.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Protocol

log = logging.getLogger(__name__)


class StepEngine(Protocol):
    """The part of judge_engine.llm.LLMEngine the server uses."""

    def add_request(self, request_id: str, prompt: Any, params: Any) -> None: ...
    def step(self) -> list[Any]: ...
    def abort_request(self, request_id: str) -> None: ...
    def has_unfinished(self) -> bool: ...


class EngineFailure(RuntimeError):
    """The engine raised inside step() or add_request(); every request it held is failed with this."""


@dataclass
class _Add:
    request_id: str
    prompt: Any
    params: Any
    deliver: Callable[[Any], None]


@dataclass
class _Abort:
    request_id: str


@dataclass
class LoopStats:
    requests_added: int = 0
    requests_finished: int = 0
    requests_aborted: int = 0
    steps: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0        # most requests inside the engine at once (waiting or running)
    peak_step_outputs: int = 0     # most requests that gained a token in one step
    peak_running_seqs: int = 0     # most sequences in the scheduler's running batch: > 1 means clients shared it
    busy_s: float = 0.0
    started_at: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def running_seqs(engine: StepEngine, outputs: list[Any]) -> int:
    """Sequences in the running batch after a step, plus those that finished in it (they ran in it too)."""
    scheduler = getattr(engine, "scheduler", None)
    running = len(getattr(scheduler, "running", ()))
    return running + sum(1 for output in outputs if getattr(output, "finish_reason", None) in ("stop", "length"))


class EngineLoop:
    def __init__(self, engine: StepEngine, idle_wait_s: float = 0.5):
        self.engine = engine
        self.stats = LoopStats()
        self._inbox: queue.SimpleQueue[_Add | _Abort | None] = queue.SimpleQueue()
        self._deliver: dict[str, Callable[[Any], None]] = {}
        self._ids = itertools.count()
        self._idle_wait_s = idle_wait_s
        self._thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
        self._stopping = False

    # ------------------------------------------------------------ handler side (asyncio)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stopping = True
        self._inbox.put(None)
        self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    def new_request_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    async def generate(self, request_id: str, prompt: Any, params: Any) -> AsyncIterator[Any]:
        """Yield the engine's outputs for one request until it finishes.

        Closing the iterator early (client gone, handler cancelled) aborts the request, which frees its KV blocks.
        """
        if not self.alive:
            raise EngineFailure("the engine loop is not running")
        loop = asyncio.get_running_loop()
        outputs: asyncio.Queue[Any] = asyncio.Queue()

        def deliver(item: Any) -> None:
            loop.call_soon_threadsafe(outputs.put_nowait, item)

        self._inbox.put(_Add(request_id, prompt, params, deliver))
        finished = False
        try:
            while not finished:
                item = await outputs.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = bool(getattr(item, "finished", False))
                yield item
        finally:
            if not finished:
                self._inbox.put(_Abort(request_id))

    # ------------------------------------------------------------ engine side (thread)

    def _run(self) -> None:
        while not self._stopping:
            if not self._drain_inbox(block=not self._deliver):
                continue
            if not self.engine.has_unfinished():
                # Requests we wait on that the engine no longer holds would otherwise spin this loop forever.
                self._fail_all(EngineFailure("the engine dropped the request without a final output"))
                continue
            self.stats.in_flight = len(self._deliver)
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)
            started = time.perf_counter()
            try:
                outputs = self.engine.step()
            except Exception as exc:  # noqa: BLE001 - a crashed step must fail the requests, not hang them
                log.exception("engine step failed")
                self._fail_all(EngineFailure(f"engine step failed: {type(exc).__name__}: {exc}"))
                continue
            self.stats.busy_s += time.perf_counter() - started
            self.stats.steps += 1
            self.stats.peak_step_outputs = max(self.stats.peak_step_outputs, len(outputs))
            self.stats.peak_running_seqs = max(self.stats.peak_running_seqs, running_seqs(self.engine, outputs))
            for output in outputs:
                self._hand_back(output)
            self.stats.in_flight = len(self._deliver)
        self._fail_all(EngineFailure("the server is shutting down"))

    def _drain_inbox(self, block: bool) -> bool:
        """Apply pending commands; returns False when woken only to stop."""
        try:
            command = self._inbox.get(timeout=self._idle_wait_s) if block else self._inbox.get_nowait()
        except queue.Empty:
            return not block
        while True:
            if command is None:
                return False
            self._apply(command)
            try:
                command = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _apply(self, command: _Add | _Abort) -> None:
        if isinstance(command, _Abort):
            if self._deliver.pop(command.request_id, None) is not None:
                self.engine.abort_request(command.request_id)
                self.stats.requests_aborted += 1
            return
        try:
            self.engine.add_request(command.request_id, command.prompt, command.params)
        except Exception as exc:  # noqa: BLE001 - e.g. a prompt longer than the model allows: this request only
            _send(command.deliver, exc)
            return
        self._deliver[command.request_id] = command.deliver
        self.stats.requests_added += 1

    def _hand_back(self, output: Any) -> None:
        request_id = output.request_id
        deliver = self._deliver.get(request_id)
        if deliver is None:   # aborted while its last step ran
            return
        if getattr(output, "finished", False):
            del self._deliver[request_id]
            self.stats.requests_finished += 1
        if not _send(deliver, output) and request_id in self._deliver:
            del self._deliver[request_id]   # nobody is listening any more: free its blocks now
            self.engine.abort_request(request_id)
            self.stats.requests_aborted += 1

    def _fail_all(self, error: EngineFailure) -> None:
        # Free everything before telling the handlers, so that a client reading /metrics right after its error
        # sees the engine's state after the failure, not before it.
        failed = list(self._deliver.items())
        self._deliver.clear()
        for request_id, _ in failed:
            try:
                self.engine.abort_request(request_id)
            except Exception:  # noqa: BLE001 - the engine is already broken; the handler still must hear back
                log.exception("abort after a failed step")
        self.stats.in_flight = 0
        for _, deliver in failed:
            _send(deliver, error)

    def stats_dict(self) -> dict[str, Any]:
        """The loop's counters, plus the requests in flight and the KV blocks in use read now (plain reads of a
        dict's length and an int, safe from another thread), so /metrics never shows a figure the engine thread
        has not got round to updating."""
        stats = self.stats.as_dict()
        stats["in_flight"] = len(self._deliver)
        stats["kv_blocks_used"] = getattr(getattr(self.engine, "block_manager", None), "num_used", None)
        return stats


def _send(deliver: Callable[[Any], None], item: Any) -> bool:
    """Hand an item to a handler's event loop; False when that loop is closed (the handler is gone)."""
    try:
        deliver(item)
    except RuntimeError:
        return False
    return True
