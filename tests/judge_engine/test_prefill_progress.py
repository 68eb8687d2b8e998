"""LLM.score's on_prefill: prompt tokens done as the batch's prefill advances, not only as prompts finish.

The engine computes every prompt of a batch together, chunk by chunk under a token budget, so the prompts all
finish near the end; on_prefill is what a progress bar can follow meanwhile."""

from __future__ import annotations

import threading

import pytest

from engine_fixtures import random_prompt, tiny_llama, tiny_llm  # noqa: F401

CHOICES = [" yes", " no", " maybe maybe"]   # the last one has several tokens: a prompt+choice sequence


@pytest.fixture(scope="module")
def llm(tiny_llama):
    # a 32-token step budget: each prompt below takes several steps, and the batch many more
    return tiny_llm(tiny_llama, max_num_batched_tokens=32)


def prompt_tokens(llm, prompt: list[int]) -> int:
    """The prompt tokens of one prompt's sequences: the prompt alone, and prompt + choice per longer choice."""
    longer = [n for n in (len(llm.tokenizer.encode(c, add_special_tokens=False)) for c in CHOICES) if n > 1]
    assert longer   # the tests need a prompt+choice sequence
    return len(prompt) + sum(len(prompt) + n for n in longer)


def test_prefill_progress_is_reported_step_by_step_before_any_prompt_is_scored(llm):
    prompts = [random_prompt(300 + i, 90 + 7 * i) for i in range(3)]
    events: list[tuple] = []
    steps_before = llm.stats()["steps"]
    results = llm.score(prompts, CHOICES, on_scored=lambda i: events.append(("scored", i)),
                       on_prefill=lambda done, total: events.append(("prefill", done, total)))
    steps = llm.stats()["steps"] - steps_before
    assert all(isinstance(r, list) for r in results)
    reports = [e[1:] for e in events if e[0] == "prefill"]
    total = sum(prompt_tokens(llm, p) for p in prompts)
    assert {t for _, t in reports} == {total}
    done = [d for d, _ in reports]
    assert done == sorted(set(done)) and done[-1] == total     # strictly increasing, ending at the total
    assert len(reports) >= steps // 2 > 3                     # about once a step, over a multi-chunk prefill
    first_scored = next(i for i, e in enumerate(events) if e[0] == "scored")
    # the bar moves step by step before the first prompt is scored (here all three finish in the last step)
    assert all(e[0] == "prefill" for e in events[:first_scored])
    assert len([e for e in events[:first_scored] if e[1] < total]) >= 3
    assert sorted(e[1] for e in events if e[0] == "scored") == [0, 1, 2]


def test_tokens_the_prefix_cache_serves_count_as_done_when_matched(llm):
    prompt = random_prompt(310, 120)
    llm.score([prompt], CHOICES)
    reports: list[tuple[int, int]] = []
    llm.score([prompt], CHOICES, on_prefill=lambda done, total: reports.append((done, total)))
    # block_size 4: all but the last block of each sequence's prompt comes from the cache at admission, in the
    # first step
    assert reports[0][0] >= reports[0][1] - 4 * 8 and reports[-1][0] == reports[-1][1]
    assert len(reports) <= 3   # nothing left to report chunk by chunk


def test_an_exception_from_on_prefill_reaches_the_caller_and_the_engine_goes_on(llm):
    def explode(done: int, total: int) -> None:
        raise RuntimeError("progress bar broke")

    with pytest.raises(RuntimeError, match="progress bar broke"):
        llm.score([random_prompt(320, 100)], CHOICES, on_prefill=explode)
    assert not llm.engine.has_unfinished_requests()   # the failed call's requests were aborted
    assert isinstance(llm.score([random_prompt(321, 20)], CHOICES)[0], list)


def test_callers_sharing_the_llm_each_hear_of_their_own_prompts(llm):
    reports: dict[int, list[tuple[int, int]]] = {0: [], 1: []}

    def call(index: int) -> None:
        prompts = [random_prompt(330 + 10 * index + i, 60) for i in range(2)]
        llm.score(prompts, CHOICES, on_prefill=lambda done, total: reports[index].append((done, total)))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    total = prompt_tokens(llm, random_prompt(0, 60)) * 2
    for seen in reports.values():
        done = [d for d, _ in seen]
        assert done == sorted(set(done)) and seen[-1] == (total, total)
