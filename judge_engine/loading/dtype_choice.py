"""The floating-point type the engine computes in when none is asked for, and a warning when the one asked for
is slow on this CPU.

bfloat16 halves the memory of the weights and the KV cache, and on some CPUs its products outrun float32's. On
CPUs without bfloat16 dot-product instructions (x86 avx512_bf16 or amx_bf16, arm64 bf16) torch converts every
element and bfloat16 products crawl: measured on a 2-core AVX2 EPYC, about 1 GFLOP/s against 137 in float32.
So a CPU whose flags list none of those instructions gets float32 without any measurement; otherwise (a flag, or
no flag list at all) the engine's own product is timed once at start-up in each type and decides.

The engine's own product, not a plain square matmul: on a 2-core Zen 4 EPYC (avx512_bf16) a 256-square
torch.mm ran 1.8x faster in bfloat16, yet the row-tiled products the engine runs on the CPU
(judge_engine/layers/row_tiles.py) ran 2x slower, and benchmarks/engine_judge.py 3x slower end to end.
CUDA devices keep float32 unless asked: the Triton kernels' reference results are float32.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from judge_engine.loading.cpu_info import CpuInfo, host_cpu

log = logging.getLogger(__name__)

BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
# bfloat16 becomes the default only when it is clearly faster: with a margin, measurement noise on a CPU where
# the two types run about as fast cannot flip the choice from one start-up to the next.
BFLOAT16_MIN_SPEEDUP = 1.25
# An explicit bfloat16 this many times slower than float32 or worse warns: beyond the noise of the measurement,
# and the rest of a step (norms, attention, conversions) widens the gap end to end.
SLOW_BFLOAT16_SLOWDOWN = 1.25


class SlowDtypeWarning(UserWarning):
    """The dtype asked for runs much slower on this CPU than float32."""


@dataclass(frozen=True)
class MatmulSpeed:
    float32_flops: float
    bfloat16_flops: float

    @property
    def bfloat16_slowdown(self) -> float:
        """How many times slower bfloat16 products run than float32's (below 1: faster)."""
        return self.float32_flops / self.bfloat16_flops

    def describe(self) -> str:
        return (f"bfloat16 matrix products measured at {self.bfloat16_flops / 1e9:.1f} GFLOP/s against "
                f"{self.float32_flops / 1e9:.1f} in float32")


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str
    reason: str
    warning: str | None = None


@functools.lru_cache(maxsize=1)
def measure_matmul_speed(rows: int = 256, size: int = 512, repeats: int = 8, budget_s: float = 0.1) -> MatmulSpeed:
    """The best of a few [rows, size] x [size, size] products in each type, run as the engine runs them on the
    CPU (row tiles), on the threads torch uses; measured once per process. 512 wide: narrower products
    understated the gap (256 wide: from 1.05x to 1.5x between runs where 512 gave 2.0x and the engine 3x). The
    repeats stop once `budget_s` is spent, so a CPU where bfloat16 crawls pays about 0.3 s, not seconds."""
    import torch

    from judge_engine.layers import row_tiles

    def flops(dtype) -> float:
        x = torch.randn(rows, size).to(dtype)
        weight = torch.randn(size, size).to(dtype)
        row_tiles.linear(x, weight)  # the first call pays for the library's set-up
        best, spent = float("inf"), 0.0
        for _ in range(repeats):
            start = time.perf_counter()
            row_tiles.linear(x, weight)
            elapsed = time.perf_counter() - start
            best, spent = min(best, elapsed), spent + elapsed
            if spent > budget_s:
                break
        return 2 * rows * size * size / max(best, 1e-9)

    return MatmulSpeed(flops(torch.float32), flops(torch.bfloat16))


def choose_cpu_dtype(requested: str | None, cpu: CpuInfo, measure: Callable[[], MatmulSpeed]) -> DtypeChoice:
    """The dtype for a CPU engine: `requested` ("float32", "bfloat16", or None for the hardware's choice) on
    `cpu`; `measure` is called only when the flags cannot decide alone or a warning needs the ratio."""
    if requested == "float32":
        return DtypeChoice("float32", "asked for")
    has_bfloat16_instructions = bool(cpu.flags & BFLOAT16_FLAGS)
    if requested is None and cpu.flags_known and not has_bfloat16_instructions:
        return DtypeChoice("float32", f"{cpu.model_name} has no bfloat16 matrix instructions "
                                      f"(none of {', '.join(sorted(BFLOAT16_FLAGS))} in its CPU flags)")
    speed = measure()
    if requested == "bfloat16":
        if speed.bfloat16_slowdown >= SLOW_BFLOAT16_SLOWDOWN:
            return DtypeChoice("bfloat16", "asked for", warning=(
                f"dtype='bfloat16' on {cpu.model_name}: {speed.describe()} ({speed.bfloat16_slowdown:.1f}x "
                f"slower); float32 (dtype='float32', or no dtype) runs faster on this CPU"))
        return DtypeChoice("bfloat16", "asked for")
    if requested is not None:
        raise ValueError(f"dtype: expected 'float32', 'bfloat16' or None, got {requested!r}")
    if 1 / speed.bfloat16_slowdown >= BFLOAT16_MIN_SPEEDUP:
        return DtypeChoice("bfloat16", f"{speed.describe()} on {cpu.model_name}")
    return DtypeChoice("float32", f"{speed.describe()} on {cpu.model_name}")


def resolve_dtype(requested: str | None, device: str) -> DtypeChoice:
    """choose_cpu_dtype on this machine's CPU for a CPU engine, float32 by default elsewhere; a slow choice warns
    (a SlowDtypeWarning and a log record, so that it shows whether or not warnings are displayed)."""
    if device != "cpu":
        return DtypeChoice(requested or "float32", "asked for" if requested else "the default off the CPU")
    choice = choose_cpu_dtype(requested, host_cpu(), measure_matmul_speed)
    if choice.warning is not None:
        log.warning(choice.warning)
        warnings.warn(choice.warning, SlowDtypeWarning, stacklevel=4)
    return choice
