"""The engine loop's own duties, on a scripted step engine: joining a running batch, aborting, failing loudly."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from judge_engine.server.engine_loop import EngineFailure, EngineLoop


@dataclass
class Out:
    request_id: str
    token_ids: list[int]
    finished: bool
    finish_reason: str | None = None


@dataclass
class CountingEngine:
    """Each request emits `tokens` outputs, one per step; every running request advances in every step."""

    tokens: int = 5
    fail_on_step: int | None = None
    running: dict[str, list[int]] = field(default_factory=dict)
    aborted: list[str] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)
    steps: int = 0
    step_delay_s: float = 0.02   # a model step takes time; requests arrive during it

    @property
    def scheduler(self):   # LLMEngine's shape: engine.scheduler.running is the running batch
        return self

    def add_request(self, request_id, prompt, params):
        if prompt == "reject":
            raise ValueError("prompt rejected")
        self.running[request_id] = []

    def abort_request(self, request_id):
        self.aborted.append(request_id)
        self.running.pop(request_id, None)

    def has_unfinished(self):
        return bool(self.running)

    def step(self):
        time.sleep(self.step_delay_s)
        self.steps += 1
        if self.fail_on_step == self.steps:
            raise RuntimeError("CUDA error: device-side assert")
        self.batch_sizes.append(len(self.running))
        outputs = []
        for request_id, tokens in list(self.running.items()):
            tokens.append(len(tokens))
            done = len(tokens) == self.tokens
            outputs.append(Out(request_id, list(tokens), done, "length" if done else None))
            if done:
                del self.running[request_id]
        return outputs


async def collect(loop: EngineLoop, request_id: str, prompt="p") -> list[Out]:
    return [output async for output in loop.generate(request_id, prompt, None)]


def run_with_loop(engine, body):
    loop = EngineLoop(engine, idle_wait_s=0.05)
    loop.start()
    try:
        return asyncio.run(body(loop))
    finally:
        loop.stop()


def test_requests_added_while_the_engine_runs_join_its_batch():
    engine = CountingEngine(tokens=6)

    async def body(loop):
        first = asyncio.ensure_future(collect(loop, "a"))
        while not engine.steps:
            await asyncio.sleep(0.001)
        second = await collect(loop, "b")
        return await first, second, loop

    first, second, loop = run_with_loop(engine, body)
    assert [o.token_ids for o in first][-1] == list(range(6)) and second[-1].finished
    assert max(engine.batch_sizes) == 2 and loop.stats.peak_running_seqs >= 2
    assert loop.stats.requests_finished == 2 and loop.stats.in_flight == 0


def test_leaving_early_aborts_the_request():
    engine = CountingEngine(tokens=1000)

    async def body(loop):
        async for output in loop.generate("a", "p", None):
            if len(output.token_ids) == 3:
                break
        while not engine.aborted:
            await asyncio.sleep(0.001)
        return loop

    loop = run_with_loop(engine, body)
    assert engine.aborted == ["a"] and loop.stats.requests_aborted == 1 and not engine.running


def test_a_failed_step_fails_every_waiting_request_instead_of_hanging_them():
    engine = CountingEngine(tokens=50, fail_on_step=3)

    async def body(loop):
        results = await asyncio.gather(collect(loop, "a"), collect(loop, "b"), return_exceptions=True)
        after = await collect(loop, "c")   # the loop itself survives and serves the next request
        return results, after

    results, after = run_with_loop(engine, body)
    assert all(isinstance(r, EngineFailure) and "device-side assert" in str(r) for r in results)
    assert after[-1].finished


def test_a_rejected_request_gets_its_error_and_the_others_run():
    engine = CountingEngine(tokens=3)

    async def body(loop):
        return await asyncio.gather(collect(loop, "bad", prompt="reject"), collect(loop, "good"),
                                    return_exceptions=True)

    bad, good = run_with_loop(engine, body)
    assert isinstance(bad, ValueError) and good[-1].finished


def test_a_stopped_loop_refuses_new_requests():
    loop = EngineLoop(CountingEngine())
    with pytest.raises(EngineFailure, match="not running"):
        asyncio.run(collect(loop, "a"))
