"""The rotary embedding through the engine's kernel (judge_engine/layers/rope.py, kernels/rotary.c): the same bits
as torch's operations and as the definition worked out in numpy (each product and sum one float32 rounding), for
strided queries and keys as the fused projection leaves them, any head size and rows of cos and sin picked out by
index; other dtypes and layouts go to torch. Skipped, with the reason, where the kernel cannot be built."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from judge_engine.layers import rope


@pytest.fixture(autouse=True)
def kernel_here():
    if rope.rotary_kernel().function is None:
        pytest.skip(f"the rotary kernel is unavailable here: {rope.rotary_kernel().reason}")


def angles(tokens: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.randint(0, 32768, (tokens,), generator=torch.Generator().manual_seed(seed))
    return rope.rotary_cos_sin(positions, rope.inverse_frequencies(dim, 1e6, None), torch.float32)


def by_definition(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> np.ndarray:
    x, c, s = (t.numpy().astype(np.float32) for t in (x, cos, sin))
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * c[..., :half] - second * s[..., :half],
                           second * c[..., half:] + first * s[..., half:]], axis=-1)


def assert_same_bits(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    kernel = rope._rotary_by_kernel(x, cos, sin)
    assert kernel is not None
    assert torch.equal(kernel.view(torch.int32), rope.rotary_in_torch(x, cos, sin).view(torch.int32))
    assert np.array_equal(kernel.numpy().view(np.int32), by_definition(x, cos, sin).view(np.int32))
    assert torch.equal(rope.apply_rotary(x, cos, sin), kernel)


@pytest.mark.parametrize("tokens, heads, dim", [(1, 12, 128), (37, 2, 128), (20, 9, 64), (5, 3, 6), (3, 1, 2)])
def test_strided_queries_and_keys_as_the_fused_projection_leaves_them(tokens, heads, dim):
    generator = torch.Generator().manual_seed(tokens * heads + dim)
    fused = torch.randn(tokens, (heads + 2) * dim, generator=generator) * 30
    x = fused[:, dim:(heads + 1) * dim].view(tokens, heads, dim)    # a view: rows (heads + 2) * dim apart
    assert tokens == 1 or not x.is_contiguous()
    cos, sin = angles(tokens, dim, seed=dim)
    assert_same_bits(x, cos, sin)


def test_rows_of_cos_and_sin_picked_out_by_index():
    cos, sin = angles(40, 64, seed=1)
    keep = torch.tensor([3, 17, 39])
    x = torch.randn(3, 9, 64)
    assert_same_bits(x, cos.index_select(0, keep), sin.index_select(0, keep))


def test_extreme_values():
    cos, sin = angles(4, 16, seed=2)
    x = torch.tensor([0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 1.0, -1.0] * 8).view(4, 1, 16)
    assert_same_bits(x, cos, sin)


def test_other_dtypes_and_layouts_go_to_torch():
    cos, sin = angles(4, 32, seed=3)
    assert rope._rotary_by_kernel(torch.randn(4, 2, 32, dtype=torch.float64), cos.double(), sin.double()) is None
    assert rope._rotary_by_kernel(torch.randn(4, 2, 32).bfloat16(), cos.bfloat16(), sin.bfloat16()) is None
    transposed = torch.randn(4, 32, 2).transpose(1, 2)     # the head dimension not contiguous
    assert rope._rotary_by_kernel(transposed, cos, sin) is None
    assert torch.equal(rope.apply_rotary(transposed, cos, sin), rope.rotary_in_torch(transposed, cos, sin))
    empty = rope._rotary_by_kernel(torch.zeros(0, 2, 32), cos[:0], sin[:0])
    assert empty is not None and empty.shape == (0, 2, 32)


def test_the_real_model_scores_the_same_bits_with_the_kernel_and_with_torch(monkeypatch):
    """SmolLM2-135M in float32: its log-probabilities with the rotary embedding through the kernel and through torch's
    operations, to the last bit."""
    from judge_engine import LLM

    prompts = ["The total travel spend is 48.2L, within the 50L budget. " * 20 + "Is the budget met? Answer:"]
    llm = LLM(None, dtype="float32", enable_prefix_caching=False)   # both runs compute every token
    by_kernel = llm.score(prompts, [" yes", " no"])
    monkeypatch.setattr(rope, "_rotary_by_kernel", lambda x, cos, sin: None)
    by_torch = llm.score(prompts, [" yes", " no"])
    assert [[value.hex() for value in row] for row in by_kernel] == [[value.hex() for value in row] for row in by_torch]
