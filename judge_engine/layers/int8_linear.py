"""int8 linear maps' products (W8A8: judge_engine/loading/quantization.py), and the route that computes them here.

Activations and weights are both quantized with one scale per GROUP consecutive terms along the products' depth (of
a row of activations, of an output channel of the weight; the last group may be shorter), and each output is
``((0 + (P_0 * a_0) * w_0) + (P_1 * a_1) * w_1) + ...``: ``P_g`` the exact integer sum over group ``g`` of activation
codes times weight codes, ``a_g`` the row's scale and ``w_g`` the output channel's scale for that group, one float
rounding per multiply and per add, groups in order. A scale per group keeps an outlier from coarsening a whole row or
channel; for the weights, groups of 32 are the sub-blocks of the GGUF formats they come from (Q4_K, Q6_K), whose
scales vary along a channel, which one int8 scale per channel rounded coarsely (docs/engine-design.md, int8
products, has the measurements). Every step is elementwise, a max over part of one row or an exact integer sum, so
a row's output depends on that row alone, whatever the batch.

The routes (METHODS), each giving the same bits: "vnni", the AVX-512 VNNI kernel (int8_vnni.py), and "avx2", the
AVX2 kernel (int8_avx2.py), each computing the groups in one pass; or slices, each group's integer sums through
``int8_matmul`` ("int_mm": torch._int_mm, oneDNN; "float32": float32 products of the codes), then scaled and added.
``_int_mm`` is not exact everywhere: on CPUs without AVX-512 VNNI / AVX-VNNI / AMX, oneDNN's int8 kernels saturate
16-bit intermediate sums (measured here with ONEDNN_MAX_CPU_ISA=AVX2 or AVX512_CORE: a 1024-term row of 127s came
out 16,385,536 too small, random rows off by 10^5). It is not fast everywhere either: on an AMD EPYC (Zen 3, AVX2) it
is exact but ran 1-4 GFLOP/s, against 60-100 for float32 products. So the first int8 product of a process probes
each route on worst-case and random operands against exact int64 sums, times the exact ones on a judging step's
shape, and takes the fastest (JUDGE_ENGINE_INT8_MATMUL=vnni|int_mm|avx2|float32 forces one). The float32 route
multiplies over chunks of at most EXACT_FLOAT32_K terms: each term is at most 127 * 127 = 16129 in magnitude, so
every partial sum of a chunk is an integer below 1024 * 16129 = 16,516,096 < 2^24 and exact in float32 in any
summation order; the chunks are added in int32 (exact below 2^31: K up to 133,143 terms, checked when a weight is
quantized). A group's sum is below 2^24 too (groups of at most 1024 terms), so it turns into float32 exactly.
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from judge_engine.layers import int8_activations, int8_avx2, int8_vnni, row_tiles
from judge_engine.layers.block_weight import BlockRows, BlockWeight

QMAX = 127
EXACT_FLOAT32_K = 1024              # 1024 * 127 * 127 < 2^24: a chunk's float32 sum is exact in any order
MAX_INT32_K = (2**31 - 1) // (QMAX * QMAX)  # 133,143 terms: the int32 sum cannot overflow
GROUP = 32                          # terms per scale, of activations and of weights (docs/engine-design.md)
MATMUL_ENV = "JUDGE_ENGINE_INT8_MATMUL"  # "auto" (default), or one of METHODS
INTEGER_METHODS = ("int_mm", "avx2", "float32")   # int8_matmul's routes to exact int32 sums
METHODS = ("vnni", *INTEGER_METHODS)               # grouped_matmul's routes: the VNNI kernel, or slices


# -- the arithmetic -----------------------------------------------------------------------------------------------
def scale_columns(depth: int, group: int | None = GROUP) -> int:
    """Scales per row of ``depth`` terms: one per ``group`` consecutive terms (the last group may be shorter), or
    one for the whole row (``group`` None)."""
    return 1 if group is None else -(-depth // group)


def quantize_weight(weight: torch.Tensor, group: int | None = GROUP,
                    rows_at_once: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 [N, K], float32 scales [N, ceil(K / group)]): symmetric, one scale per ``group`` consecutive terms of
    an output channel (the last group may be shorter); ``group`` None: one scale per channel (scales [N, 1]). Rows
    are independent, so they are quantized ``rows_at_once`` at a time: a 150k-row LM head needs no float32
    temporaries of its own size."""
    rows, depth = weight.shape
    if depth > MAX_INT32_K:
        raise ValueError(f"int8 products of {depth} terms could overflow int32 (at most {MAX_INT32_K})")
    group = max(depth, 1) if group is None else group
    q = torch.empty(weight.shape, dtype=torch.int8)
    scale = torch.empty((rows, scale_columns(depth, group)), dtype=torch.float32)
    for start in range(0, rows, rows_at_once):
        stop = min(start + rows_at_once, rows)
        q[start:stop], scale[start:stop] = _quantize_groups(weight[start:stop].detach().to(torch.float32), group)
    return q, scale


def quantize_activations(x: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 [M, K], float32 scales [M, ceil(K / group)]): symmetric, one scale per ``group`` consecutive values of a
    row (the last group may be shorter), from those values alone: through the engine's kernel where it serves, the
    same bits as torch's operations in one pass."""
    x = x.to(torch.float32)
    return int8_activations.quantize(x, group) or _quantize_groups(x, group)


def _quantize_groups(x: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 codes of float32 ``x [rows, K]``, scales [rows, ceil(K / group)]): ``max |x| / 127`` over each group of
    ``group`` consecutive values of a row (the last group may be shorter); a zero group: zeros, scale 0."""
    rows, depth = x.shape
    short = -depth % group   # zeros fill the last group: they change neither its max |x| nor its codes
    groups = (F.pad(x, (0, short)) if short else x).reshape(rows, (depth + short) // group, group)
    # max |x| as max(max x, -min x): two plain reductions run ~50x faster than vector_norm(inf) (measured)
    # (abs_: +0 for a group of zeros whatever their signs, as the kernel gives, int8_activations.py)
    amax = torch.maximum(groups.amax(-1, keepdim=True), groups.amin(-1, keepdim=True).neg_()).abs_()
    # torch computes this as (1 / amax) * 127, two roundings (its reciprocal times the number), which the kernel
    # of int8_activations.py reproduces
    inverse = QMAX / amax.clamp_min(1e-30)
    # no clamp needed: |x| <= amax, so |x * inverse| <= 127 * (1 + 2^-23)^2 < 127.5 rounds into [-127, 127]
    q = torch.mul(groups, inverse).round_().to(torch.int8).reshape(rows, depth + short)[:, :depth]
    return q, amax.squeeze(-1) / QMAX


# grouped_matmul's routes that compute every group in one kernel call: route -> (its kernel, the group sizes it takes)
GROUPED_KERNELS = {"vnni": (int8_vnni.kernel, 4), "avx2": (int8_avx2.grouped_kernel, 4)}


def grouped_matmul(q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, weight_scales: torch.Tensor,
                   method: str | None = None, group: int = GROUP) -> torch.Tensor:
    """float32 [M, N] = ``sum_g (float(q_g @ weight_g.T) * scales[:, g]) * weight_scales[:, g]``, groups in order,
    for int8 ``q [M, K]`` and ``weight [N, K]``, ``scales [M, ceil(K / group)]`` from quantize_activations and
    ``weight_scales [N, ceil(K / group)]`` from quantize_weight; ``method`` one of METHODS (None: the process's
    choice). Every method gives the same bits."""
    _check_grouped(q, scales, weight, weight_scales, group)
    method = method or int8_matmul_method()
    if method in GROUPED_KERNELS and group % GROUPED_KERNELS[method][1] == 0:
        return _grouped_kernel_call(method, q, scales, weight, weight_scales, group)
    return _grouped_by_slices(q, scales, weight, weight_scales, group, lambda a, b: int8_matmul(a, b, method))


def exact_grouped(q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, weight_scales: torch.Tensor,
                  group: int = GROUP) -> torch.Tensor:
    """grouped_matmul's result from int64 sums: the reference every route must equal to the bit."""
    return _grouped_by_slices(q, scales, weight, weight_scales, group,
                              lambda a, b: a.to(torch.int64) @ b.to(torch.int64))


def _check_grouped(q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, weight_scales: torch.Tensor,
                   group: int) -> None:
    operands = (q, scales, weight, weight_scales)
    if q.dtype != torch.int8 or weight.dtype != torch.int8 or {scales.dtype, weight_scales.dtype} != {torch.float32}:
        raise ValueError("grouped int8 products take int8 activations and weights, with float32 scales")
    if any(t.device.type != "cpu" for t in operands):
        raise ValueError("grouped int8 products run on the CPU")
    rows, depth = q.shape
    groups = scale_columns(depth, group) if group > 0 else -1
    if (weight.shape[1] != depth or scales.shape != (rows, groups) or weight_scales.shape != (weight.shape[0], groups)
            or not 0 < group <= EXACT_FLOAT32_K):
        # a group of at most 1024 terms sums below 2^24, so its sum turns into float32 exactly
        raise ValueError(f"shapes {tuple(q.shape)}, {tuple(scales.shape)}, {tuple(weight.shape)} and "
                         f"{tuple(weight_scales.shape)} do not match groups of {group} terms (at most "
                         f"{EXACT_FLOAT32_K})")


def _grouped_kernel_call(method: str, q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor,
                         weight_scales: torch.Tensor, group: int) -> torch.Tensor:
    found = GROUPED_KERNELS[method][0]()
    if found.function is None:
        raise RuntimeError(f"the {method} int8 kernel is unavailable: {found.reason}")
    q, scales, weight, weight_scales = (t if t.stride(1) == 1 else t.contiguous()
                                        for t in (q, scales, weight, weight_scales))
    out = torch.empty((q.shape[0], weight.shape[0]), dtype=torch.float32)
    arguments = (q.data_ptr(), q.stride(0), scales.data_ptr(), scales.stride(0), q.shape[0], q.shape[1], group,
                 weight.data_ptr(), weight.stride(0), weight_scales.data_ptr(), weight_scales.stride(0),
                 out.data_ptr(), out.stride(0), weight.shape[0], torch.get_num_threads())
    if out.numel() and found.function(*arguments) != 0:
        raise ValueError(f"the {method} int8 kernel refused groups of {group} terms")
    return out


def _grouped_by_slices(q: torch.Tensor, scales: torch.Tensor, weight: torch.Tensor, weight_scales: torch.Tensor,
                       group: int, integer_sums) -> torch.Tensor:
    """The groups one at a time: ``integer_sums(a [M, g], b [g, N])``'s exact sums, into float, times the scales."""
    out = torch.zeros((q.shape[0], weight.shape[0]), dtype=torch.float32)
    for index, start in enumerate(range(0, q.shape[1], group)):
        sums = integer_sums(q[:, start:start + group], weight[:, start:start + group].t())
        out.add_(sums.to(torch.float32).mul_(scales[:, index:index + 1]).mul_(weight_scales[:, index]))
    return out

def int8_matmul(a: torch.Tensor, b: torch.Tensor, method: str) -> torch.Tensor:
    """Exact int32 ``a @ b`` of int8 ``a [M, K]`` and ``b [K, N]`` (every value of ``b`` in [-127, 127]) through
    ``method``, one of INTEGER_METHODS."""
    if method == "int_mm":
        return torch._int_mm(a, b)
    if method == "avx2":
        return int8_avx2.matmul(a, b)
    if method == "float32":
        return _float32_exact_mm(a, b)
    raise ValueError(f"int8 matmul method: expected one of {', '.join(INTEGER_METHODS)}, got {method!r}")


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
    method: str    # one of METHODS
    reason: str


@functools.lru_cache(maxsize=None)
def int8_products() -> Int8Products:
    """The fastest route that gives exact results on this machine (each probed once); float32 products of the codes
    always do. Every route gives the same bits, so the choice changes the speed, never a result."""
    forced = os.environ.get(MATMUL_ENV, "auto")
    if forced in METHODS:
        usable, reason = probe_exact(forced)
        if not usable:
            raise RuntimeError(f"${MATMUL_ENV}={forced}: that route is not usable here ({reason})")
        return Int8Products(forced, f"forced by ${MATMUL_ENV}")
    if forced != "auto":
        raise ValueError(f"${MATMUL_ENV}: expected 'auto' or one of {', '.join(METHODS)}, got {forced!r}")
    exact, refused = exact_routes()
    speeds = probe_speeds(exact)
    chosen = max(exact, key=speeds.__getitem__)
    measured = ", ".join(f"{method} {speeds[method]:.1f} GFLOP/s" for method in exact)
    reason = f"the fastest exact route here ({measured})"
    if refused:
        reason += f"; not used: {'; '.join(refused)}"
    if chosen == "float32":
        # seen on an AMD EPYC (Zen 3, AVX2) without a C compiler: _int_mm exact at 1-4 GFLOP/s, float32 at 60-100
        warnings.warn(SlowInt8Warning(
            f"int8 products: no integer kernel runs here ({reason}), so they run as exact float32 products of "
            "32 terms at a time, about 6x slower than the same model unquantized (the 1.5B judge on a 2-core Zen "
            "4: 296 s against 48 s). The engine's int8 kernels need an x86-64 CPU with AVX2 and a C compiler "
            "($CC, or cc on PATH); or load the model with quantization=None (float32 results)"), stacklevel=2)
    return Int8Products(chosen, reason)


class SlowInt8Warning(UserWarning):
    """int8 products have no integer kernel on this machine: exact, the same bits, but several times slower than
    float32 products."""


def exact_routes() -> tuple[list[str], list[str]]:
    """The routes that compute exact results here, float32 first (it always does), and why each other one does
    not."""
    exact, refused = ["float32"], []
    for method in METHODS:
        if method == "float32":
            continue
        usable, reason = probe_exact(method)
        if usable:
            exact.append(method)
        else:
            refused.append(f"{method}: {reason}")
    return exact, refused


def int8_matmul_method() -> str:
    return int8_products().method


def probe_speeds(methods: list[str], rows: int = 256, depth: int = 1536, cols: int = 1536,
                 repeats: int = 3) -> dict[str, float]:
    """GFLOP/s of each method's grouped product of a judging step's shape (the 1.5B default's hidden size; best of
    `repeats` after a warm-up). A method whose warm-up took 4x the best time so far is not timed again: it has
    lost (``_int_mm`` at 5 GFLOP/s on an AVX2-only CPU would add a second to every start-up)."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randint(-QMAX, QMAX + 1, (rows, depth), dtype=torch.int8, generator=generator)
    scales = torch.rand((rows, scale_columns(depth)), generator=generator)
    weight = torch.randint(-QMAX, QMAX + 1, (cols, depth), dtype=torch.int8, generator=generator)
    weight_scales = torch.rand((cols, scale_columns(depth)), generator=generator)

    def seconds(method: str) -> float:
        started = time.perf_counter()
        grouped_matmul(a, scales, weight, weight_scales, method)
        return time.perf_counter() - started

    times: dict[str, float] = {}
    for method in methods:
        warm_up = seconds(method)
        lost = bool(times) and warm_up > 4 * min(times.values())
        times[method] = warm_up if lost else min(seconds(method) for _ in range(repeats))
    return {method: 2 * rows * depth * cols / max(elapsed, 1e-9) / 1e9 for method, elapsed in times.items()}


def probe_exact(method: str) -> tuple[bool, str]:
    """Whether ``method`` computes exact results here: its integer sums on worst-case (every term +-127 * 127) and
    random operands, one row and many, against int64 sums, and its grouped products against exact_grouped to the
    bit; (False, why) where it is missing, fails or is off."""
    if method == "int_mm" and not hasattr(torch, "_int_mm"):
        return False, "torch has no _int_mm"
    if method == "avx2" and int8_avx2.kernel().function is None:
        return False, int8_avx2.kernel().reason
    if method == "vnni" and int8_vnni.kernel().function is None:
        return False, int8_vnni.kernel().reason
    generator = torch.Generator().manual_seed(0)
    try:
        for rows, depth, cols in ((1, 1024, 64), (7, 1536, 40), (33, 576, 96), (128, 2048, 64), (5, 1000, 7)):
            full = torch.full((rows, depth), QMAX, dtype=torch.int8)
            weights = torch.randint(-QMAX, QMAX + 1, (cols, depth), dtype=torch.int8, generator=generator)
            weights[0] = QMAX
            weights[1] = -QMAX
            random = torch.randint(-QMAX, QMAX + 1, (rows, depth), dtype=torch.int8, generator=generator)
            scales = torch.rand((rows, scale_columns(depth)), generator=generator)
            weight_scales = torch.rand((cols, scale_columns(depth)), generator=generator)
            for a in (full, random, -full):
                if method in INTEGER_METHODS:
                    exact = a.to(torch.int64) @ weights.t().to(torch.int64)
                    got = int8_matmul(a, weights.t(), method).to(torch.int64)
                    if not torch.equal(got, exact):
                        error = int((got - exact).abs().max())
                        return False, f"a {rows} x {depth} x {cols} product was off by up to {error}"
                if not torch.equal(grouped_matmul(a, scales, weights, weight_scales, method),
                                   exact_grouped(a, scales, weights, weight_scales)):
                    return False, f"a {rows} x {depth} x {cols} grouped product differed from exact sums"
    except (RuntimeError, NotImplementedError) as exc:
        return False, f"it failed: {exc}"
    return True, "exact"


class Int8Weight(nn.Module):
    """A linear map's weight as int8 [N, K] with float32 scales [N, ceil(K / GROUP)] (quantize_weight), multiplied
    by int8 activations (W8A8); ``linear`` dispatches on it."""

    def __init__(self, qweight: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        rows, depth = qweight.shape
        if tuple(scale.shape) not in self.scale_shapes(rows, depth):
            raise ValueError(f"int8 weight {rows} x {depth}: scales of shape {tuple(scale.shape)}, expected one of "
                             f"{sorted(self.scale_shapes(rows, depth))}")
        self.register_buffer("qweight", qweight)
        self.register_buffer("scale", scale)

    @staticmethod
    def scale_shapes(rows: int, depth: int) -> set[tuple[int, int]]:
        return {(rows, scale_columns(depth))}

    @property
    def shape(self) -> torch.Size:
        return self.qweight.shape

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        out = grouped_matmul(*quantize_activations(x), self.qweight, self.scale)
        return out if bias is None else out.add_(bias)


class DequantizedInt8Weight(Int8Weight):
    """A linear map's weight held int8, multiplied by float activations (W8A32): scales per group of GROUP terms of
    a channel (quantize_weight), or one per channel ([N, 1]; the LM head's).

    The memory of int8 without the cost of quantizing activations; at the speed of float products. The LM head
    always runs this way under quantization="int8" (quantizing its activations per token cost the most accuracy of
    any map, docs/benchmarks.md; held int8, a tied head no longer keeps the float embeddings resident), and every map
    does under quantization="int8-weights". The products are the float path's (batch-invariant) over the weight's
    values ``float(code) * scale``, one rounding, as a block weight of int8 codes (layers/block_weight.py): the
    float32 kernel rebuilds a panel of them at a time in cache, the torch route a column chunk; per-channel scales
    multiply the product's columns after it (the codes are read with scale 1, exactly). A depth that is not a whole
    number of groups takes float copies of DEQUANTIZED_ROWS rows at a time instead."""

    DEQUANTIZED_ROWS = 8192   # fixed: every product's shape is a function of the weight's alone

    @staticmethod
    def scale_shapes(rows: int, depth: int) -> set[tuple[int, int]]:
        return {(rows, scale_columns(depth, None)), (rows, scale_columns(depth))}

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        rows, depth = self.qweight.shape
        per_channel = self.scale.shape[1] == 1
        if depth % GROUP == 0:
            # one weight row's scales: its groups' own, or ones (a stride-0 view: no copy per row)
            scale = torch.ones(1, depth // GROUP).expand(rows, -1) if per_channel else self.scale
            out = row_tiles.linear(x, BlockWeight([BlockRows(self.qweight, scale, None, GROUP)]))
        else:
            out = self._dequantized_chunks(x, per_channel)
        if per_channel:
            out.mul_(self.scale[:, 0].to(x.dtype))
        return out if bias is None else out.add_(bias)

    def _dequantized_chunks(self, x: torch.Tensor, per_channel: bool) -> torch.Tensor:
        out = torch.empty(x.shape[0], self.qweight.shape[0], dtype=x.dtype, device=x.device)
        for start in range(0, self.qweight.shape[0], self.DEQUANTIZED_ROWS):
            stop = start + self.DEQUANTIZED_ROWS
            rows = self.qweight[start:stop].to(torch.float32)
            if not per_channel:
                rows.mul_(self.scale[start:stop].repeat_interleave(GROUP, dim=1)[:, :rows.shape[1]])
            out[:, start:stop] = row_tiles.linear(x, rows.to(x.dtype))
        return out


def linear(x: torch.Tensor, weight: torch.Tensor | Int8Weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight.T + bias``: int8 for an Int8Weight, else the float product (row tiles on the CPU)."""
    if isinstance(weight, Int8Weight):
        return weight(x, bias)
    return row_tiles.linear(x, weight, bias)
