"""Several threads calling one LLM: their requests join the same engine batches (judge_engine/engine/step_sharing.py)."""

from __future__ import annotations

import threading
import time

import pytest

from engine_fixtures import random_prompt, tiny_llama, tiny_llm  # noqa: F401
from judge_engine import SamplingParams


@pytest.fixture(scope="module")
def llm(tiny_llama):
    return tiny_llm(tiny_llama)


def greedy(max_tokens: int) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)


def _in_thread(call):
    box: dict = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def _wait_for_steps(llm, steps: int) -> None:
    deadline = time.monotonic() + 60
    while llm.engine.stats_counters.steps < steps:
        assert time.monotonic() < deadline, "the engine never stepped"
        time.sleep(0.001)


def test_a_call_made_while_another_runs_is_served_next_to_it_not_after_it(llm):
    long_prompts = [random_prompt(70 + i, 12) for i in range(2)]
    short_prompt = random_prompt(80, 9)
    alone_long = llm.generate(long_prompts, greedy(200))
    alone_short = llm.generate([short_prompt], greedy(3))
    started = llm.engine.stats_counters.steps

    long_call, long_box = _in_thread(lambda: llm.generate(long_prompts, greedy(200)))
    _wait_for_steps(llm, started + 3)   # the long call is decoding
    short = llm.generate([short_prompt], greedy(3))
    still_running = long_call.is_alive()
    long_call.join()

    # Each engine step serves both calls: the short one needs 4 of the long one's 201 steps. Had it waited for
    # the long call's batch to end, the long call would be finished by now.
    assert still_running
    assert "error" not in long_box
    assert [o.token_ids for o in short] == [o.token_ids for o in alone_short]   # batch-invariant: same outputs
    assert [o.token_ids for o in long_box["value"]] == [o.token_ids for o in alone_long]
    assert llm.engine.block_manager.num_used == 0


def test_concurrent_score_calls_get_what_each_gets_alone(llm):
    prompt_sets = [[random_prompt(100 + 10 * caller + i, 7 + 3 * i) for i in range(3)] for caller in range(4)]
    choices = [[5], [6, 7], [8, 9, 10]]
    alone = [llm.score(prompts, choices) for prompts in prompt_sets]
    barrier = threading.Barrier(len(prompt_sets))

    def call(prompts):
        barrier.wait()
        return llm.score(prompts, choices)

    calls = [_in_thread(lambda prompts=prompts: call(prompts)) for prompts in prompt_sets]
    for thread, _ in calls:
        thread.join()
    assert [box.get("value") for _, box in calls] == alone
    assert llm.engine.block_manager.num_used == 0


def test_an_exception_in_one_callers_callback_reaches_that_caller_only(llm):
    failing_prompts = [random_prompt(200 + i, 10) for i in range(6)]
    other_prompts = [random_prompt(300 + i, 10) for i in range(6)]
    alone = llm.score(other_prompts, [[5], [6]])

    def explode(index):
        raise RuntimeError(f"progress bar broke at {index}")

    failing, failing_box = _in_thread(lambda: llm.score(failing_prompts, [[5], [6]], on_scored=explode))
    other = llm.score(other_prompts, [[5], [6]])
    failing.join()
    assert other == alone
    assert isinstance(failing_box.get("error"), RuntimeError)
    # the failed caller's unfinished requests were aborted: every block is back, the engine serves on
    assert llm.engine.block_manager.num_used == 0
    assert not llm.engine.has_unfinished_requests()
    assert llm.score(other_prompts, [[5], [6]]) == alone
