"""The CPU path's own attention and log-softmax kernels (judge_engine/layers/attention/row_attention.py,
kernels/row_attention.c; judge_engine/layers/log_softmax.py, kernels/log_softmax.c): a query row's output and
log-sum-exp are the same bits alone and in any call, with any number of threads; they are the bits IEEE 754
arithmetic defines for the kernels' order of operations, worked out here without the CPU's SIMD code (so the same
on every CPU that runs them); they are within float32 error of attention in float64, masked, soft-capped or
broadcast; torch's flash attention stays reachable. Skipped, with the reason, where the kernels cannot be built (no
AVX2 or FMA, no C compiler)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from exact_float import f32, fma32

from judge_engine.layers import c_kernels
from judge_engine.layers.attention import row_attention, torch_paged
from judge_engine.layers.log_softmax import kernel as log_softmax_kernel
from judge_engine.layers.log_softmax import log_softmax


@pytest.fixture(autouse=True)
def kernels_here():
    for kernel in (row_attention.kernel(), log_softmax_kernel()):
        if kernel.function is None:
            pytest.skip(f"the engine's softmax kernels are unavailable here: {kernel.reason}")
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def random_call(generator, batch=2, heads=3, rows=40, keys=70, dim=32, masked=True):
    q = torch.randn(batch, heads, rows, dim, generator=generator)
    k = torch.randn(batch, heads, keys, dim, generator=generator)
    v = torch.randn(batch, heads, keys, dim, generator=generator)
    mask = None
    if masked:
        mask = torch.zeros(batch, 1, rows, keys).masked_fill_(torch.rand(batch, 1, rows, keys, generator=generator)
                                                              < 0.3, float("-inf"))
        mask[..., 0] = 0.0   # every row sees a key
    return q, k, v, mask


def reference(q, k, v, scale, mask=None, softcap=None):
    scores = q.double() @ k.double().transpose(-1, -2) * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if mask is not None:
        scores = scores + mask.double()
    return torch.softmax(scores, -1) @ v.double(), torch.logsumexp(scores, -1)


@pytest.mark.parametrize("softcap", [None, 30.0])
def test_a_row_is_the_same_bits_alone_in_any_call_and_with_any_threads(softcap):
    q, k, v, mask = random_call(torch.Generator().manual_seed(1))
    torch.set_num_threads(2)
    out, lse = row_attention.attend(q, k, v, 0.2, mask, softcap)
    torch.set_num_threads(1)
    for b, h, r in [(0, 0, 0), (1, 2, 39), (0, 1, 17)]:
        alone = row_attention.attend(q[b:b + 1, h:h + 1, r:r + 1], k[b:b + 1, h:h + 1], v[b:b + 1, h:h + 1], 0.2,
                                     mask[b:b + 1, :, r:r + 1], softcap)
        assert torch.equal(alone[0][0, 0, 0], out[b, h, r]) and torch.equal(alone[1][0, 0, 0], lse[b, h, r])
    # among other rows: the same queries in another order, beside others
    shuffled = torch.cat([q.flip(2), torch.randn(2, 3, 9, 32)], dim=2)
    shuffled_mask = torch.cat([mask.flip(2), torch.zeros(2, 1, 9, 70)], dim=2)
    again, again_lse = row_attention.attend(shuffled, k, v, 0.2, shuffled_mask, softcap)
    assert torch.equal(again[:, :, :40].flip(2), out) and torch.equal(again_lse[:, :, :40].flip(2), lse)


@pytest.mark.parametrize("shape", [(1, 2, 33, 130, 16), (2, 1, 7, 5, 64), (1, 3, 96, 700, 128), (1, 1, 12, 40, 256)])
@pytest.mark.parametrize("softcap", [None, 50.0])
def test_the_values_are_attention_within_float32_error(shape, softcap):
    batch, heads, rows, keys, dim = shape
    q, k, v, mask = random_call(torch.Generator().manual_seed(keys), batch, heads, rows, keys, dim)
    q = q * 3   # scores of several units: the softmax far from uniform
    out, lse = row_attention.attend(q, k, v, dim ** -0.5, mask, softcap)
    want, want_lse = reference(q, k, v, dim ** -0.5, mask, softcap)
    torch.testing.assert_close(out.double(), want, rtol=0, atol=2e-5)
    torch.testing.assert_close(lse.double(), want_lse, rtol=0, atol=2e-5)


def test_broadcast_and_strided_inputs_are_read_as_the_values_they_hold():
    generator = torch.Generator().manual_seed(3)
    cache = torch.randn(1, 90, 2, 32, generator=generator)     # [1, keys, kv heads, dim] as the cache lays it out
    keys = cache.permute(0, 2, 1, 3).expand(4, -1, -1, -1)     # batch broadcast, heads and keys strided
    values = (cache * 2).permute(0, 2, 1, 3).expand(4, -1, -1, -1)
    q = torch.randn(5, 2, 4, 32, generator=generator).permute(2, 1, 0, 3)   # [4, 2, 5, 32], rows strided
    mask = torch.zeros(1, 1, 5, 90)
    mask[..., 60:] = float("-inf")
    out, lse = row_attention.attend(q, keys, values, 0.1, mask)
    want, want_lse = reference(q, keys, values, 0.1, mask)
    torch.testing.assert_close(out.double(), want, rtol=0, atol=1e-5)
    torch.testing.assert_close(lse.double(), want_lse, rtol=0, atol=1e-5)


def test_a_row_whose_keys_are_all_masked_gets_zeros_and_no_mass():
    q, k, v, _ = random_call(torch.Generator().manual_seed(4), 1, 1, 3, 20, 16, masked=False)
    mask = torch.zeros(1, 1, 3, 20)
    mask[0, 0, 1] = float("-inf")
    out, lse = row_attention.attend(q, k, v, 0.25, mask)
    assert torch.equal(out[0, 0, 1], torch.zeros(16)) and lse[0, 0, 1] == float("-inf")
    assert bool(torch.isfinite(out[0, 0, [0, 2]]).all())


# -- the bits by definition (kernels/exp_log.h, row_attention.c, log_softmax.c) ---------------------------------

LOG2E, LN2_HI, LN2_LO = f32(1.44269504088896341), f32(0.693359375), f32(-2.12194440e-4)
EXP_POLYNOMIAL = [f32(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                                   1.6666665459e-1, 5.0000001201e-1)]


def defined_exp(x: np.float32) -> np.float32:
    if x < f32(-87.33654):
        return f32(0.0)
    n = np.rint(x * LOG2E)
    r = fma32(-n, LN2_HI, x)
    r = fma32(-n, LN2_LO, r)
    p = EXP_POLYNOMIAL[0]
    for c in EXP_POLYNOMIAL[1:]:
        p = fma32(p, r, c)
    y = fma32(p, r * r, r) + f32(1.0)
    return y * f32(2.0 ** int(max(n, -126)))


def defined_log(s: np.float32) -> np.float32:
    m, e = math.frexp(float(s))
    if m < 0.70710678118654752:
        m, e = m * 2.0, e - 1
    t = (m - 1.0) / (m + 1.0)
    t2, term, series = t * t, t, 0.0
    for k in range(1, 20, 2):
        series += term / k
        term *= t2
    return f32(2.0 * series + e * 0.69314718055994531)


def lanes_total(values: list[np.float32]) -> np.float32:
    lanes = [f32(0.0)] * 8
    for j, value in enumerate(values):
        lanes[j % 8] = lanes[j % 8] + value
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]))


def defined_tanh_capped(x: np.float32, cap: np.float32) -> np.float32:
    y = x / cap
    t = defined_exp(abs(y) * f32(-2.0))
    tanh = (f32(1.0) - t) / (f32(1.0) + t)
    return (-tanh if y < 0 else tanh) * cap


def defined_attention_row(q, k, v, scale, mask_row, softcap):
    scores = []
    for key in k:
        chain = f32(0.0)
        for a, b in zip(q, key):
            chain = fma32(a, b, chain)
        x = chain * scale
        if softcap is not None:
            x = defined_tanh_capped(x, softcap)
        scores.append(x + mask_row[len(scores)])
    top = max(scores)
    weights = [defined_exp(s - top) for s in scores]
    total = lanes_total(weights)
    out = []
    for d in range(len(q)):
        chain = f32(0.0)
        for weight, value in zip(weights, v):
            chain = fma32(weight, value[d], chain)
        out.append(chain / total)
    return out, top + defined_log(total)


@pytest.mark.parametrize("softcap", [None, 2.0])
def test_the_attention_bits_are_those_ieee_arithmetic_defines_for_the_kernels_order(softcap):
    """Every value follows from IEEE 754 and the order of operations alone, computed here without the CPU's SIMD
    code: so every CPU with AVX2 and FMA gives the same bits (Intel or AMD, with or without AVX-512), where torch's
    flash attention gave others on AVX-512 than on AVX2."""
    q, k, v, mask = random_call(torch.Generator().manual_seed(5), 1, 1, 3, 21, 16)
    q = q * 2
    out, lse = row_attention.attend(q, k, v, 0.3, mask, softcap)
    as32 = lambda t: t.numpy().astype(np.float32)   # noqa: E731
    for r in range(3):
        want, want_lse = defined_attention_row(as32(q[0, 0, r]), as32(k[0, 0]), as32(v[0, 0]), f32(0.3),
                                               as32(mask[0, 0, r]), None if softcap is None else f32(softcap))
        assert out[0, 0, r].numpy().tobytes() == np.array(want, dtype=np.float32).tobytes()
        assert lse[0, 0, r].numpy().tobytes() == np.float32(want_lse).tobytes()


def test_the_log_softmax_bits_are_those_ieee_arithmetic_defines():
    x = (torch.randn(2, 27, generator=torch.Generator().manual_seed(6)) * 6).numpy()
    x[1, 5] = -np.inf
    got = log_softmax(torch.from_numpy(x))
    for row, values in zip(got.numpy(), x):
        top = max(values)
        log_total = defined_log(lanes_total([defined_exp(f32(value) - top) for value in values]))
        assert row.tobytes() == np.array([(f32(value) - top) - log_total for value in values],
                                         dtype=np.float32).tobytes()


def test_the_exp_is_within_two_ulp_over_its_range():
    """log_softmax([0, x]) = [-log(1 + e^x), x - log(1 + e^x)]: for x far below 0 the first is -e^x, so its relative
    error is the exp's."""
    x = -np.linspace(0, 87, 200_001, dtype=np.float32)
    rows = torch.from_numpy(np.stack([np.zeros_like(x), x], axis=1))   # log-softmax of [0, x] holds exp(x)
    got = log_softmax(rows)
    total = (torch.from_numpy(x).double().exp() + 1.0)
    want = torch.stack([-total.log(), torch.from_numpy(x).double() - total.log()], dim=1)
    torch.testing.assert_close(got.double(), want, rtol=2.5e-7, atol=1e-7)


@pytest.mark.parametrize("shape", [(49152,), (3, 151936), (4, 7), (2, 1)])
def test_log_softmax_is_within_float32_error(shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[-1])) * 8
    got = log_softmax(x)
    assert got.shape == x.shape
    # two float32 roundings of values up to ~80 (x - max, then minus the log-sum): up to ~1.5e-5 each way
    torch.testing.assert_close(got.double(), torch.log_softmax(x.double(), -1), rtol=0, atol=2e-5)
    strided = torch.randn(3, 100)[:, ::2]
    torch.testing.assert_close(log_softmax(strided), torch.log_softmax(strided, -1), rtol=0, atol=1e-6)


def test_other_dtypes_and_the_environment_take_torchs_route(monkeypatch):
    q, k, v, _ = random_call(torch.Generator().manual_seed(8), 1, 2, 32, 64, 16, masked=False)
    assert row_attention.serves(q, k, v, None)
    assert not row_attention.serves(q.bfloat16(), k.bfloat16(), v.bfloat16(), None)
    assert not row_attention.serves(q[..., :8].contiguous(), k[..., :8].contiguous(), v[..., :8].contiguous(), None)
    row = torch.randn(50).bfloat16()
    assert torch.equal(log_softmax(row), torch.log_softmax(row, -1))
    kernel_out = torch_paged._attend(q, k, v, 0.25, None, None)
    monkeypatch.setenv(row_attention.ROUTE_ENV, "flash")
    row_attention.kernel.cache_clear()
    log_softmax_kernel.cache_clear()
    try:
        assert row_attention.kernel().function is None
        assert "JUDGE_ENGINE_ATTENTION=flash" in row_attention.kernel().reason
        assert not row_attention.serves(q, k, v, None)
        flash_out = torch_paged._attend(q, k, v, 0.25, None, None)
        torch.testing.assert_close(flash_out, kernel_out, rtol=1e-5, atol=1e-5)
        x = torch.randn(3, 40)
        assert torch.equal(log_softmax(x), torch.log_softmax(x, -1))
    finally:
        monkeypatch.delenv(row_attention.ROUTE_ENV)
        row_attention.kernel.cache_clear()
        log_softmax_kernel.cache_clear()
    assert row_attention.kernel().function is not None


def test_a_cpu_without_fma_gets_no_kernel(monkeypatch):
    from judge_engine.loading.cpu_info import CpuInfo

    monkeypatch.setattr(c_kernels, "host_cpu", lambda: CpuInfo("an old x86-64", frozenset({"avx", "avx2"})))
    kernel = c_kernels.load("row_attention.c", "row_attention", [], needs=("avx2", "fma"))
    assert kernel.function is None and kernel.reason == "this CPU lists no FMA"
