"""The engine's own float32 product (judge_engine/layers/float_gemm.py, kernels/float_gemm.c): a row's result is
the same bits alone and in any batch, with any number of threads; they are the bits IEEE 754 arithmetic defines for
the kernel's order of operations, worked out here in exact rationals (so the same on every CPU that runs it); a
weight in a GGUF block format gives its float weight's bits; the values are within the error bound of the kernel's
summation; the torch route stays reachable.
Skipped, with the reason, where the kernel cannot be built (no AVX2 or FMA, no C compiler)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from exact_float import float32_rounded
from tiny_models import random_blocks

from judge_engine.layers import c_kernels, float_gemm, row_tiles
from judge_engine.layers.block_weight import BlockWeight
from judge_engine.loading.gguf_blocks import READERS, read_block_rows

KC = 256   # kernels/float_gemm.c: the terms of one chain
MC = 192   # its rows of a per block


@pytest.fixture(autouse=True)
def kernel_here():
    if float_gemm.kernel().function is None:
        pytest.skip(f"the float32 kernel is unavailable here: {float_gemm.kernel().reason}")
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def block_weight(tmp_path, formats: list[tuple[str, int]], columns: int, seed: int = 0) -> BlockWeight:
    """A weight of parts in the given formats (rows each), from random blocks written to a file."""
    parts = []
    for index, (kind, rows) in enumerate(formats):
        blocks = random_blocks(kind, rows * columns // READERS[kind].values, np.random.default_rng(seed + index))
        path = tmp_path / f"{kind}-{index}.bin"
        path.write_bytes(blocks.tobytes())
        parts.append(read_block_rows(str(path), 0, kind, rows, columns))
    return BlockWeight(parts)


def weights(tmp_path) -> dict[str, object]:
    generator = torch.Generator().manual_seed(0)
    return {
        "float32": torch.randn(300, 640, generator=generator),           # 300 outputs: a last panel of 12
        "Q4_K+Q6_K": block_weight(tmp_path, [("Q4_K", 200), ("Q6_K", 88)], 768),
        "Q4_0+Q8_0+Q5_1": block_weight(tmp_path, [("Q4_0", 40), ("Q8_0", 33), ("Q5_1", 16)], 576),
    }


@pytest.mark.parametrize("kind", ["float32", "Q4_K+Q6_K", "Q4_0+Q8_0+Q5_1"])
def test_a_row_is_the_same_bits_alone_in_any_batch_and_with_any_threads(tmp_path, kind):
    weight = weights(tmp_path)[kind]
    parts, starts = row_tiles.weight_parts(weight)
    generator = torch.Generator().manual_seed(1)
    target = torch.randn(1, weight.shape[1], generator=generator)
    bias = torch.randn(weight.shape[0], generator=generator)
    torch.set_num_threads(1)
    alone = float_gemm.linear(target, parts, starts, bias)
    for threads in (1, 2, 3):
        torch.set_num_threads(threads)
        for count in (2, 5, 6, 7, MC - 1, MC, MC + 1, 2 * MC + 17):   # whole and partial tiles and row blocks
            for place in {0, count // 2, count - 1}:
                batch = torch.randn(count, weight.shape[1], generator=generator)
                batch[place] = target[0]
                together = float_gemm.linear(batch, parts, starts, bias)
                assert torch.equal(together[place], alone[0]), (threads, count, place)


def test_a_block_weight_gives_the_bits_of_its_float_weight(tmp_path):
    for weight in list(weights(tmp_path).values())[1:]:
        dense = weight.rows(0, weight.shape[0])
        x = torch.randn(45, weight.shape[1])
        assert torch.equal(row_tiles.linear(x, weight), row_tiles.linear(x, dense))
        assert torch.equal(weight(x), float_gemm.linear(x, [dense], [0, dense.shape[0]]))


def defined_product(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """The kernel's arithmetic by its definition (kernels/float_gemm.c): for each output, chains of fused
    multiply-adds over KC terms each from zero (one rounding per step), the chains added in order, then the bias."""
    rows = [[Fraction(float(v)) for v in row] for row in x.tolist()]
    columns = [[Fraction(float(v)) for v in row] for row in weight.tolist()]
    out = torch.empty(len(rows), len(columns))
    for m, a in enumerate(rows):
        for n, w in enumerate(columns):
            total = None
            for start in range(0, len(a), KC):
                chain = Fraction(0)
                for a_k, w_k in zip(a[start:start + KC], w[start:start + KC]):
                    chain = float32_rounded(a_k * w_k + chain)
                total = chain if total is None else float32_rounded(total + chain)
            out[m, n] = float(float32_rounded(total + Fraction(float(bias[n]))))
    return out


def test_the_bits_are_those_ieee_arithmetic_defines_for_the_kernels_order(tmp_path):
    """The product's bits follow from IEEE 754 and the order of operations alone, computed here without the CPU's
    floating point: so every CPU with AVX2 and FMA gives the same bits (Intel or AMD, with or without AVX-512)."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(3, 600, generator=generator)          # chains of 256, 256 and 88 terms
    for weight in (torch.randn(17, 600, generator=generator) * 0.05,
                   block_weight(tmp_path, [("Q4_K", 9), ("Q6_K", 8)], 768).rows(0, 17)):
        x = x if x.shape[1] == weight.shape[1] else torch.randn(3, weight.shape[1], generator=generator)
        bias = torch.randn(weight.shape[0], generator=generator)
        got = float_gemm.linear(x, [weight], [0, weight.shape[0]], bias)
        assert torch.equal(got, defined_product(x, weight, bias))


@pytest.mark.parametrize("depth", [100, KC, 8960])
def test_the_product_is_within_the_error_bound_of_its_summation(depth):
    """Each output is chains of KC terms (one rounding per fused multiply-add) added together, so its error is at
    most (KC + depth / KC + 1) unit roundoffs of the sum of |a_k w_k| (the bound of recursive summation), whatever
    the CPU; a wrong term, a dropped panel or a misplaced bias breaks it by far more."""
    generator = torch.Generator().manual_seed(depth)
    x = torch.randn(13, depth, generator=generator)
    weight = torch.randn(40, depth, generator=generator)
    bias = torch.randn(40, generator=generator)
    got = row_tiles.linear(x, weight, bias).double()
    exact = x.double() @ weight.double().T + bias.double()
    magnitude = x.double().abs() @ weight.double().abs().T + bias.double().abs()
    unit = 2.0 ** -24
    bound = (KC + depth / KC + 1) * unit * magnitude
    assert bool(((got - exact).abs() <= bound).all())
    torch.testing.assert_close(got.float(), F.linear(x, weight, bias), rtol=1e-4, atol=1e-4)


def test_empty_products_and_strided_inputs():
    weight, bias = torch.randn(20, 48), torch.randn(20)
    assert row_tiles.linear(torch.empty(0, 48), weight, bias).shape == (0, 20)
    strided = torch.randn(48, 9).t()    # a column-major input is read as the values it holds
    torch.testing.assert_close(row_tiles.linear(strided, weight, bias), F.linear(strided, weight, bias),
                               rtol=1e-5, atol=1e-5)
    rows = torch.randn(9, 96)[:, ::2]   # rows with a stride of 2 between values
    torch.testing.assert_close(row_tiles.linear(rows, weight), F.linear(rows, weight), rtol=1e-5, atol=1e-5)


def test_the_environment_chooses_the_torch_route(monkeypatch):
    x, weight = torch.randn(7, 64), torch.randn(33, 64)
    with_kernel = row_tiles.linear(x, weight)
    monkeypatch.setenv(float_gemm.ROUTE_ENV, "torch")
    float_gemm.kernel.cache_clear()
    try:
        assert float_gemm.kernel().function is None and "JUDGE_ENGINE_FLOAT_GEMM=torch" in float_gemm.kernel().reason
        assert not float_gemm.serves(x, [weight])
        torch.testing.assert_close(row_tiles.linear(x, weight), with_kernel, rtol=1e-5, atol=1e-5)
    finally:
        monkeypatch.delenv(float_gemm.ROUTE_ENV)
        float_gemm.kernel.cache_clear()
    assert float_gemm.kernel().function is not None


def test_a_cpu_without_fma_gets_no_kernel(monkeypatch):
    from judge_engine.loading.cpu_info import CpuInfo

    monkeypatch.setattr(c_kernels, "host_cpu", lambda: CpuInfo("an old x86-64", frozenset({"avx", "avx2"})))
    kernel = c_kernels.load("float_gemm.c", "float_gemm", [], needs=("avx2", "fma"))
    assert kernel.function is None and kernel.reason == "this CPU lists no FMA"


def test_bfloat16_products_keep_the_row_tiles():
    x, weight = torch.randn(5, 64).bfloat16(), torch.randn(16, 64).bfloat16()
    assert not float_gemm.serves(x, [weight])
    torch.testing.assert_close(row_tiles.linear(x, weight).float(), F.linear(x, weight).float(), rtol=2e-2, atol=2e-2)
