"""The engine's kernel for int8 codes of activations (judge_engine/layers/int8_activations.py,
kernels/quantize_groups.c): its codes and scales are, bit for bit, the ones the quantization's definition gives in
IEEE float32 (worked out here with numpy, element by element) and the ones int8_linear's torch operations give, for
any depth, group size, stride and magnitude, zeros of either sign and ties included; a value that is not finite
leaves the row to torch. Skipped, with the reason, where the kernel cannot be built (no AVX2, no C compiler)."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from judge_engine.layers import int8_activations, int8_linear


@pytest.fixture(autouse=True)
def kernel_here():
    if int8_activations.kernel().function is None:
        pytest.skip(f"the activations' int8 kernel is unavailable here: {int8_activations.kernel().reason}")


def by_definition(x: torch.Tensor, group: int) -> tuple[np.ndarray, np.ndarray]:
    rows = x.numpy().astype(np.float32)
    groups = -(-rows.shape[1] // group)
    codes = np.zeros(rows.shape, dtype=np.int8)
    scales = np.zeros((rows.shape[0], groups), dtype=np.float32)
    for i, row in enumerate(rows):
        for g in range(groups):
            values = row[g * group:(g + 1) * group]
            amax = np.float32(np.abs(values).max())
            # (1 / amax) * 127, two roundings: how torch computes 127 / amax (its reciprocal times the number)
            inverse = (np.float32(1) / max(amax, np.float32(1e-30))) * np.float32(127)
            codes[i, g * group:(g + 1) * group] = np.rint(values * inverse).astype(np.int8)
            scales[i, g] = amax / np.float32(127)
    return codes, scales


def assert_same_bits(x: torch.Tensor, group: int) -> None:
    kernel = int8_activations.quantize(x, group)
    assert kernel is not None
    codes, scales = kernel
    torch_codes, torch_scales = int8_linear._quantize_groups(x.contiguous(), group)
    defined_codes, defined_scales = by_definition(x, group)
    assert np.array_equal(codes.numpy(), defined_codes)
    assert np.array_equal(scales.numpy().view(np.int32), defined_scales.view(np.int32))
    assert torch.equal(codes, torch_codes)
    assert torch.equal(scales.view(torch.int32), torch_scales.view(torch.int32))


@pytest.mark.parametrize("rows, depth, group", [(1, 576, 32), (5, 1536, 32), (3, 100, 32), (4, 7, 32),
                                                (2, 33, 16), (2, 2048, 1024), (3, 45, 5), (6, 64, 1)])
def test_codes_and_scales_are_the_definitions_bits(rows, depth, group):
    generator = torch.Generator().manual_seed(rows * depth + group)
    magnitudes = torch.logspace(-40, 30, rows).float()[:, None]
    assert_same_bits(torch.randn(rows, depth, generator=generator) * magnitudes, group)


def test_values_where_one_ieee_division_would_give_another_code():
    """127 / amax as one IEEE division and as torch computes it differ in a quarter of the groups, and a code then
    moves where x * inverse lies within a rounding of a half: rare in random values (about one in 100,000 of a
    judging step's activations), so such values are built here, groups whose first value is amax."""
    rng = np.random.default_rng(11)
    amax = rng.uniform(0.01, 10.0, 4000).astype(np.float32)
    one_division = np.float32(127) / amax
    as_torch = (np.float32(1) / amax) * np.float32(127)
    differ = amax[one_division != as_torch][:256]
    rows = []
    for a in differ:
        inverse = (np.float32(1) / a) * np.float32(127)
        for k in range(1, 127):
            x = np.float32((k + 0.5) / float(inverse))
            for _ in range(3):
                if np.rint(x * inverse) != np.rint(x * (np.float32(127) / a)):
                    rows.append([a, x] + [0.0] * 30)
                    break
                x = np.nextafter(x, np.float32(np.inf))
            if len(rows) % 8 == 7:
                break
    assert len(rows) >= 16
    assert_same_bits(torch.tensor(np.array(rows, dtype=np.float32)), 32)


def test_zeros_of_either_sign_ties_and_subnormals():
    x = torch.zeros(6, 64)
    x[0] = -0.0                              # a group of negative zeros: scale +0, codes 0
    x[1, ::2] = -0.0
    x[2, :32] = torch.arange(32) - 15.5      # halves, scaled by 127 / 15.5
    x[3, :32] = torch.tensor([127.0, -63.5, 0.5, -1.5, 2.5] * 6 + [3.5, -3.5])   # scale 1: exact ties
    x[4] = 1e-45 * torch.arange(-32, 32)     # subnormals
    x[5, 32:] = torch.finfo(torch.float32).max * torch.linspace(-1, 1, 32)
    assert_same_bits(x, 32)


def test_a_strided_view_is_read_in_place():
    wide = torch.randn(40, 300)
    assert_same_bits(wide[:, 17:17 + 256], 32)
    assert_same_bits(wide.t()[:64, :40], 8)     # a transposed view: copied first, the same values


def test_a_row_with_a_value_that_is_not_finite_is_left_to_torch():
    for bad in (float("nan"), float("inf"), float("-inf")):
        x = torch.randn(3, 96)
        x[1, 40] = bad
        assert int8_activations.quantize(x, 32) is None
        codes, scales = int8_linear.quantize_activations(x)     # torch's operations answer
        torch_codes, torch_scales = int8_linear._quantize_groups(x, 32)
        assert torch.equal(codes, torch_codes)
        assert torch.equal(scales.isnan(), torch_scales.isnan())
        assert torch.equal(scales.nan_to_num(), torch_scales.nan_to_num())


def test_empty_inputs():
    codes, scales = int8_activations.quantize(torch.zeros(0, 96), 32)
    assert codes.shape == (0, 96) and scales.shape == (0, 3)
    codes, scales = int8_activations.quantize(torch.zeros(4, 0), 32)
    assert codes.shape == (4, 0) and scales.shape == (4, 0)


def test_other_dtypes_and_shapes_are_not_served():
    assert int8_activations.quantize(torch.randn(3, 64, dtype=torch.float64), 32) is None
    assert int8_activations.quantize(torch.randn(2, 3, 64), 32) is None


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 5), depth=st.integers(1, 200), group=st.sampled_from([1, 3, 8, 16, 32, 64, 1024]),
       exponent=st.integers(-30, 30), seed=st.integers(0, 2**31 - 1))
def test_any_shape_and_magnitude(rows, depth, group, exponent, seed):
    generator = torch.Generator().manual_seed(seed)
    assert_same_bits(torch.randn(rows, depth, generator=generator) * 10.0 ** exponent, group)


def test_the_real_model_scores_the_same_bits_with_the_kernel_and_with_torch(monkeypatch):
    """SmolLM2-135M with int8 linear maps: the log-probabilities of prompts long enough to fill several groups of
    every map, with activations quantized by the kernel and by torch's operations, to the last bit."""
    from judge_engine import LLM

    prompts = ["The total travel spend is 48.2L, within the 50L budget. " * 20 + "Is the budget met? Answer:",
               "Question: did the agent email the CFO the quarterly numbers before Friday? " * 12 + "Answer:"]
    llm = LLM(None, dtype="float32", quantization="int8", enable_prefix_caching=False)   # both runs compute all
    by_kernel = llm.score(prompts, [" yes", " no"])
    monkeypatch.setattr(int8_activations, "quantize", lambda x, group: None)
    by_torch = llm.score(prompts, [" yes", " no"])
    assert [[value.hex() for value in row] for row in by_kernel] == [[value.hex() for value in row] for row in by_torch]
