"""A prompt's score does not depend on its company: alone, in a batch of 100, with or without a prefix hit."""

from __future__ import annotations

import pytest

from engine_fixtures import random_prompt, tiny_llama, tiny_llm  # noqa: F401

TOL = 1e-5
CHOICES = [" yes", " no"]


def max_difference(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b))


def check_invariance(make_llm, target, others) -> None:
    alone = make_llm(enable_prefix_caching=False).score([target], CHOICES)[0]

    batched_llm = make_llm(enable_prefix_caching=False)
    batch = others[:50] + [target] + others[50:]
    in_batch = batched_llm.score(batch, CHOICES)[50]
    assert len(batch) == 100

    cached_llm = make_llm()
    cached_llm.score([target], CHOICES)
    hits_before = cached_llm.stats()["cached_prompt_tokens"]
    with_hit = cached_llm.score([target], CHOICES)[0]
    assert cached_llm.stats()["cached_prompt_tokens"] > hits_before  # the second call really hit the cache

    assert max_difference(alone, in_batch) < TOL
    assert max_difference(alone, with_hit) < TOL


def test_tiny_model_scores_are_batch_invariant(tiny_llama):
    target = random_prompt(300, 45)
    others = [random_prompt(400 + i, 5 + (i * 7) % 60) for i in range(99)]
    check_invariance(lambda **kw: tiny_llm(tiny_llama, **kw), target, others)


@pytest.mark.slow
def test_embedded_model_scores_are_batch_invariant():
    from judge_engine import LLM

    system = "You are a strict grader. Answer yes or no. " * 6
    target = f"{system}Criterion: the email was sent to the CFO only. Met?"
    others = [f"{system}Criterion number {i}: the answer cites source {i}. Met?" for i in range(99)]
    check_invariance(lambda **kw: LLM(**kw), target, others)
