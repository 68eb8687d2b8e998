"""StepSharing: several threads drive one LLMEngine at once, and their requests share its batches.

Each caller adds its requests (under the engine lock) and then waits for its own outputs. Whichever waiting
caller finds nobody stepping steps the engine for everybody: it routes each finished output to the caller that
owns the request, wakes the others, and steps again until its own requests are done (then another waiting caller
takes over). Requests added while a batch runs are scheduled at the next step next to the running ones:
continuous batching across callers, as the server's engine loop does for HTTP clients, without a thread of its
own. Callers that asked to add requests go before the next step, so a stepping caller never starves them.

Outputs are the same whatever joins a batch: the CPU path is batch-invariant (tests/judge_engine/
test_batch_invariance.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from judge_engine.outputs import RequestOutput

OnFinished = Callable[[str], None]
OnStep = Callable[[dict[str, int]], None]   # LLMEngine.last_step_prompt_tokens of a step this caller ran


@dataclass
class Waiter:
    """One caller's wait: the requests it owns and what has finished of them."""
    on_finished: OnFinished | None
    on_step: OnStep | None = None
    request_ids: set[str] = field(default_factory=set)
    finished: dict[str, RequestOutput] = field(default_factory=dict)
    unannounced: list[str] = field(default_factory=list)   # finished, on_finished not yet called (by the owner)

    @property
    def done(self) -> bool:
        return len(self.finished) >= len(self.request_ids)


class StepSharing:
    def __init__(self, engine) -> None:
        self.engine = engine
        self._engine_lock = threading.RLock()   # every engine call: encode, add, step, abort
        self._state = threading.Condition()      # owners, the stepping flag, callers adding
        self._owners: dict[str, Waiter] = {}
        self._stepping = False
        self._adding = 0

    @contextmanager
    def adding(self, on_finished: OnFinished | None = None, on_step: OnStep | None = None) -> Iterator[Waiter]:
        """Hold the engine to add requests (and encode prompts); put each added request's id in the yielded
        waiter's request_ids, then pass the waiter to wait(). The next step waits for every caller inside, and
        the ids are claimed before it runs, so no output of theirs can go to nobody. If the block raises, the
        requests it added are aborted. on_step, if given, hears of each step this caller's thread runs (what the
        step did to the prompts it worked on), in that thread, outside every lock."""
        waiter = Waiter(on_finished, on_step)
        with self._state:
            self._adding += 1
        try:
            with self._engine_lock:
                try:
                    yield waiter
                except BaseException:
                    for request_id in waiter.request_ids:
                        self.engine.abort_request(request_id)
                    waiter.request_ids.clear()
                    raise
        finally:
            with self._state:
                for request_id in waiter.request_ids:
                    self._owners[request_id] = waiter
                self._adding -= 1
                self._state.notify_all()

    def wait(self, waiter: Waiter) -> dict[str, RequestOutput]:
        """The finished outputs of the waiter's requests, stepping the engine while nobody else does.
        Its on_finished(request_id) is called in this thread, outside every lock, as each of them finishes (an
        exception from it reaches this caller only)."""
        try:
            while True:
                with self._state:
                    while not (waiter.done or waiter.unannounced) and (self._stepping or self._adding):
                        self._state.wait()
                    announce, waiter.unannounced = waiter.unannounced, []
                    if waiter.done and not announce:
                        return waiter.finished
                    step = not announce
                    if step:
                        self._stepping = True
                for request_id in announce:
                    waiter.on_finished(request_id)
                stepped, prompt_tokens = self._step_once() if step else (True, {})
                if step and waiter.on_step is not None:
                    waiter.on_step(prompt_tokens)
                if not stepped and not self.engine.has_unfinished_requests():
                    with self._state:
                        lost = sorted(waiter.request_ids - set(waiter.finished))
                    if lost:
                        raise RuntimeError(f"the engine holds none of the requests {lost[:3]} (engine bug)")
        finally:
            with self._state:
                for request_id in waiter.request_ids:
                    self._owners.pop(request_id, None)
                unfinished = waiter.request_ids - set(waiter.finished)
            if unfinished:   # leaving early (a failed step, an exception from on_finished): nobody wants them
                with self._engine_lock:
                    for request_id in unfinished:
                        self.engine.abort_request(request_id)

    def _step_once(self) -> tuple[bool, dict[str, int]]:
        """One engine step for every waiter: whether it produced any output, and what it did to the prompts it
        worked on (read under the engine lock: another caller's step may follow at once)."""
        outputs: list[RequestOutput] = []
        try:
            with self._engine_lock:
                outputs = self.engine.step()
                prompt_tokens = self.engine.last_step_prompt_tokens
            with self._state:
                for output in outputs:
                    owner = self._owners.get(output.request_id)
                    if output.finished and owner is not None and output.request_id not in owner.finished:
                        owner.finished[output.request_id] = output
                        if owner.on_finished is not None:
                            owner.unannounced.append(output.request_id)
        finally:   # a step that raised leaves the engine to the next waiter (whose own step raises or goes on)
            with self._state:
                self._stepping = False
                self._state.notify_all()
        return bool(outputs), prompt_tokens
