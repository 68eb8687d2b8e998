"""A prompt's score does not depend on its company: alone, in a batch of 100, with or without a prefix hit.

Bit for bit on the CPU (every product and attention call computes a row by itself or in fixed-shape row tiles,
whatever the CPU); the engine's contract elsewhere (the GPU path) is 1e-5."""

from __future__ import annotations

import pytest

from engine_fixtures import random_prompt, tiny_gemma2, tiny_llama, tiny_llm, tiny_qwen2  # noqa: F401

TOL = 0.0  # the CPU path is batch-invariant by construction
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

    assert max_difference(alone, in_batch) <= TOL
    assert max_difference(alone, with_hit) <= TOL


@pytest.fixture(params=["kernel", "flash"])
def attention_route(request, monkeypatch):
    """The engine's attention kernel (each query row by itself), and torch's flash attention on 32-row query tiles
    (the route of a CPU where the kernel does not build)."""
    from judge_engine.layers.attention import row_attention
    from judge_engine.layers.log_softmax import kernel as log_softmax_kernel

    if request.param == "flash":
        monkeypatch.setenv(row_attention.ROUTE_ENV, "flash")
    elif row_attention.kernel().function is None:
        pytest.skip(f"the attention kernel is unavailable here: {row_attention.kernel().reason}")
    row_attention.kernel.cache_clear()
    log_softmax_kernel.cache_clear()
    yield request.param
    monkeypatch.undo()
    row_attention.kernel.cache_clear()
    log_softmax_kernel.cache_clear()


def test_tiny_model_scores_are_batch_invariant(tiny_llama, attention_route):
    target = random_prompt(300, 45)
    others = [random_prompt(400 + i, 5 + (i * 7) % 60) for i in range(99)]
    check_invariance(lambda **kw: tiny_llm(tiny_llama, **kw), target, others)


@pytest.mark.slow
def test_embedded_model_scores_are_batch_invariant():
    from judge_engine import LLM

    system = "You are a strict grader. Answer yes or no. " * 6
    target = f"{system}Criterion: the email was sent to the CFO only. Met?"
    others = [f"{system}Criterion number {i}: the answer cites source {i}. Met?" for i in range(99)]
    check_invariance(lambda **kw: LLM(dtype="float32", **kw), target, others)


@pytest.mark.slow
def test_embedded_model_scores_alone_equal_scores_in_a_batch_of_40():
    """Ten judging prompts scored one at a time and among 40 (with 30 others of other lengths): the same bits."""
    from judge_engine import LLM

    llm = LLM(enable_prefix_caching=False, dtype="float32")
    system = "You grade an agent's work. Read the evidence, then answer Yes or No. "
    prompts = [f"{system}{'The agent wrote a report. ' * (i % 7)}Criterion {i}: the total is {i * 37} USD. Met?"
               for i in range(40)]
    targets = prompts[::4]
    alone = [llm.score([prompt], CHOICES)[0] for prompt in targets]
    together = llm.score(prompts, CHOICES)[::4]
    assert len(targets) == 10 and together == alone


@pytest.mark.parametrize("family, quantization", [("tiny_llama", None), ("tiny_gemma2", None),
                                                   ("tiny_qwen2", "int8")])
def test_the_mlp_in_passes_of_rows_gives_the_bits_of_one_pass(family, quantization, request, tmp_path, monkeypatch):
    """The MLP runs at most ROWS_PER_PASS rows at a time (to bound its widest activations): a whole multiple of the
    row tile, so each row meets the same products as in one pass."""
    import torch

    from judge_engine.layers import row_tiles
    from judge_engine.models.llama import LlamaMLP

    assert LlamaMLP.ROWS_PER_PASS % row_tiles.ROW_TILE == 0
    options = {"quantization": quantization, "cache_dir": tmp_path} if quantization else {}
    mlp = tiny_llm(request.getfixturevalue(family), **options).engine.model.layers[0].mlp
    x = torch.randn(7 * row_tiles.ROW_TILE, mlp.gate_up.in_features, generator=torch.Generator().manual_seed(5))
    whole = mlp(x)
    monkeypatch.setattr(LlamaMLP, "ROWS_PER_PASS", 2 * row_tiles.ROW_TILE)   # four passes, the last one tile
    assert torch.equal(mlp(x), whole)
