"""int8 x int8 -> int32 products for judge_engine/loading/quantization.py's int8 linear maps, and their dispatch.

The integer products go through ``torch._int_mm`` (oneDNN; int8 x int8 -> int32) where it computes the exact sums.
It does not everywhere: on CPUs without AVX-512 VNNI / AVX-VNNI / AMX, oneDNN's int8 kernels saturate 16-bit
intermediate sums (measured here with ONEDNN_MAX_CPU_ISA=AVX2 or AVX512_CORE: a 1024-term row of 127s came out
16,385,536 too small, random rows off by 10^5). It is not fast everywhere either: on an AMD EPYC (Zen 3, AVX2) it is
exact but ran 1-4 GFLOP/s, against 60-100 for float32 products. So the first int8 product of a process probes
``_int_mm`` on worst-case and random operands against exact int64 sums, and uses it only if every integer matches
and it outruns the float32 path on a judging step's shape; otherwise (or with JUDGE_ENGINE_INT8_MATMUL=float32) the
same integers come from float32 matrix products over chunks of at most EXACT_FLOAT32_K terms: each term is at most
127 * 127 = 16129 in magnitude, so every partial sum of a chunk is an integer below 1024 * 16129 = 16,516,096 < 2^24
and exact in float32 in any summation order; the chunks are added in int32 (exact below 2^31: K up to 133,143 terms,
checked when a weight is quantized).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass

import torch
from torch import nn

from judge_engine.layers import row_tiles

log = logging.getLogger(__name__)

QMAX = 127
EXACT_FLOAT32_K = 1024              # 1024 * 127 * 127 < 2^24: a chunk's float32 sum is exact in any order
MAX_INT32_K = (2**31 - 1) // (QMAX * QMAX)  # 133,143 terms: the int32 sum cannot overflow
MATMUL_ENV = "JUDGE_ENGINE_INT8_MATMUL"  # "auto" (default), "int_mm" or "float32"


# -- the arithmetic -----------------------------------------------------------------------------------------------
def quantize_weight(weight: torch.Tensor, rows_at_once: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 [N, K], float32 scales [N]): per output channel, symmetric. Rows are independent, so they are
    quantized ``rows_at_once`` at a time: a 150k-row LM head needs no float32 temporaries of its own size."""
    if weight.shape[1] > MAX_INT32_K:
        raise ValueError(f"int8 products of {weight.shape[1]} terms could overflow int32 (at most {MAX_INT32_K})")
    q = torch.empty(weight.shape, dtype=torch.int8)
    scale = torch.empty(weight.shape[0], dtype=torch.float32)
    for start in range(0, weight.shape[0], rows_at_once):
        w = weight[start:start + rows_at_once].detach().to(torch.float32)
        amax = torch.linalg.vector_norm(w, float("inf"), dim=1)
        scale[start:start + rows_at_once] = torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))
        q[start:start + rows_at_once] = torch.round(w / scale[start:start + rows_at_once, None]).clamp_(-QMAX, QMAX)
    return q, scale


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 [M, K], float32 scales [M, 1]): per row, symmetric, from that row alone. A zero row gives zeros."""
    x = x.to(torch.float32)
    # max |x| as max(max x, -min x): two plain reductions run ~50x faster than vector_norm(inf) (measured, 2048 x 576)
    amax = torch.maximum(x.amax(-1, keepdim=True), x.amin(-1, keepdim=True).neg_())
    inverse = QMAX / amax.clamp_min(1e-30)
    # no clamp needed: |x| <= amax, so |x * inverse| <= 127 * (1 + 2^-23)^2 < 127.5 rounds into [-127, 127]
    q = torch.mul(x, inverse).round_().to(torch.int8)
    return q, amax / QMAX


def int8_matmul(a: torch.Tensor, b: torch.Tensor, method: str | None = None) -> torch.Tensor:
    """Exact int32 ``a @ b`` of int8 ``a [M, K]`` and ``b [K, N]``; ``method`` "int_mm" or "float32" (None: the
    process's choice, int8_matmul_method())."""
    method = method or int8_matmul_method()
    if method == "int_mm":
        return torch._int_mm(a, b)
    if method == "float32":
        return _float32_exact_mm(a, b)
    raise ValueError(f"int8 matmul method: expected 'int_mm' or 'float32', got {method!r}")


def _float32_exact_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = None
    for start in range(0, a.shape[1], EXACT_FLOAT32_K):
        stop = start + EXACT_FLOAT32_K
        part = torch.mm(a[:, start:stop].to(torch.float32), b[start:stop].to(torch.float32)).to(torch.int32)
        out = part if out is None else out.add_(part)
    if out is None:
        return torch.zeros((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    return out


@dataclass(frozen=True)
class Int8Products:
    """How this process computes int8 products, and why (``rubric model list`` reports it)."""
    method: str    # "int_mm" or "float32"
    reason: str


@functools.lru_cache(maxsize=None)
def int8_products() -> Int8Products:
    """"int_mm" where torch._int_mm gives exact sums on this machine and is the faster of the two (both probed
    once), else "float32". Both give the same integers, so the choice changes the speed, never a result."""
    forced = os.environ.get(MATMUL_ENV, "auto")
    if forced in ("int_mm", "float32"):
        return Int8Products(forced, f"forced by ${MATMUL_ENV}")
    if forced != "auto":
        raise ValueError(f"${MATMUL_ENV}: expected 'auto', 'int_mm' or 'float32', got {forced!r}")
    ok, reason = probe_int_mm()
    if not ok:
        log.warning("int8: torch._int_mm is not exact on this CPU (%s); using exact float32 products", reason)
        return Int8Products("float32", f"torch._int_mm is not exact here ({reason})")
    speeds = probe_speeds()
    measured = (f"torch._int_mm {speeds['int_mm']:.1f} GFLOP/s, exact float32 products "
                f"{speeds['float32']:.1f} GFLOP/s")
    if speeds["int_mm"] < speeds["float32"]:
        # seen on an AMD EPYC (Zen 3, AVX2, no VNNI): exact, but 1-4 GFLOP/s against 60-100 for float32 products
        log.warning("int8: torch._int_mm is exact but slow on this CPU (%s); using float32 products", measured)
        return Int8Products("float32", f"torch._int_mm is exact but slower here ({measured})")
    return Int8Products("int_mm", f"torch._int_mm is exact and faster here ({measured})")


def int8_matmul_method() -> str:
    return int8_products().method


def probe_speeds(rows: int = 64, depth: int = 1024, cols: int = 1024, repeats: int = 3) -> dict[str, float]:
    """GFLOP/s of each method on one product of a judging step's shape (best of `repeats`, after a warm-up)."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-QMAX, QMAX + 1, (rows, depth), dtype=torch.int8, generator=generator)
    b = torch.randint(-QMAX, QMAX + 1, (cols, depth), dtype=torch.int8, generator=generator).t()
    speeds = {}
    for method in ("int_mm", "float32"):
        int8_matmul(a, b, method)
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            int8_matmul(a, b, method)
            best = min(best, time.perf_counter() - started)
        speeds[method] = 2 * rows * depth * cols / max(best, 1e-9) / 1e9
    return speeds


def probe_int_mm() -> tuple[bool, str]:
    """Whether torch._int_mm computes exact int32 sums here: worst-case (every term +-127 * 127) and random
    operands, one row and many, against int64 sums."""
    if not hasattr(torch, "_int_mm"):
        return False, "torch has no _int_mm"
    generator = torch.Generator().manual_seed(0)
    try:
        for rows, depth, cols in ((1, 1024, 64), (7, 1536, 40), (33, 576, 96), (128, 2048, 64)):
            full = torch.full((rows, depth), QMAX, dtype=torch.int8)
            weights = torch.randint(-QMAX, QMAX + 1, (cols, depth), dtype=torch.int8, generator=generator)
            weights[0] = QMAX
            weights[1] = -QMAX
            random = torch.randint(-QMAX, QMAX + 1, (rows, depth), dtype=torch.int8, generator=generator)
            for a in (full, random):
                exact = a.to(torch.int64) @ weights.t().to(torch.int64)
                got = torch._int_mm(a, weights.t())
                if not torch.equal(got.to(torch.int64), exact):
                    error = int((got.to(torch.int64) - exact).abs().max())
                    return False, f"a {rows} x {depth} x {cols} product was off by up to {error}"
    except (RuntimeError, NotImplementedError) as exc:
        return False, f"torch._int_mm failed: {exc}"
    return True, "exact"


class Int8Weight(nn.Module):
    """A linear map's weight as int8 [N, K] with per-output-channel float32 scales; ``linear`` dispatches on it."""

    def __init__(self, qweight: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        self.register_buffer("qweight", qweight)
        self.register_buffer("scale", scale)

    @property
    def shape(self) -> torch.Size:
        return self.qweight.shape

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        q, row_scale = quantize_activations(x)
        out = int8_matmul(q, self.qweight.t()) * row_scale  # int32 * float32 -> a fresh float32 buffer
        out.mul_(self.scale)
        return out if bias is None else out.add_(bias)


class DequantizedInt8Weight(Int8Weight):
    """A linear map's weight held int8 with per-output-channel scales, multiplied by float activations (W8A32).

    The memory of int8 without the cost of quantizing activations, which is most of int8's accuracy cost (per-token
    activation scales meet the activations' outlier channels); at the speed of float products. The LM head always
    runs this way under quantization="int8" (quantizing its activations per token cost the most accuracy of any map,
    docs/benchmarks.md; held int8, a tied head no longer keeps the float embeddings resident), and every map does
    under quantization="int8-weights". The products are the float path's (row tiles, batch-invariant) over a float
    copy of DEQUANTIZED_ROWS rows of the weight at a time, then scaled per output channel."""

    DEQUANTIZED_ROWS = 8192   # fixed: every product's shape is a function of the weight's alone

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        out = torch.empty(x.shape[0], self.qweight.shape[0], dtype=x.dtype, device=x.device)
        for start in range(0, self.qweight.shape[0], self.DEQUANTIZED_ROWS):
            stop = start + self.DEQUANTIZED_ROWS
            out[:, start:stop] = row_tiles.linear(x, self.qweight[start:stop].to(x.dtype))
        out.mul_(self.scale.to(x.dtype))
        return out if bias is None else out.add_(bias)


def linear(x: torch.Tensor, weight: torch.Tensor | Int8Weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias``: int8 for an Int8Weight, else the float product (row tiles on the CPU)."""
    if isinstance(weight, Int8Weight):
        return weight(x, bias)
    return row_tiles.linear(x, weight, bias)
