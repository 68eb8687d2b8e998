"""Exact int8 products with AVX2 integer instructions: ``kernels/int8_avx2.c``, built once per machine and loaded.

On a CPU with AVX2 but without AVX-512 VNNI or AMX (AMD Zen 2/3, Intel before Ice Lake), neither of torch's int8
routes serves the engine: ``torch._int_mm`` (oneDNN) ran exact there but at 1-4 GFLOP/s, and fbgemm's AVX2 int8
linear (torch's deprecated quantized-tensor API) saturates 16-bit pair sums unless activations are cut to 7 bits,
and scales activations per tensor, so a row's result would depend on its batch. The kernel here multiplies with
vpmaddubsw / vpmaddwd on |a| and b carrying a's sign, which never saturates for values in [-127, 127], so its int32
sums are the same integers as every other route (docs/engine-design.md, int8 products).

The shared library is compiled from the source with the machine's C compiler (``$CC``, else Python's, else ``cc``)
at the first int8 product of a process that needs it, into ``<engine cache>/kernels/`` under a name keyed by the
source, the flags and the compiler, and loaded with ctypes (which releases the GIL during a product). Without a C
compiler, or on a CPU without AVX2, the kernel is unavailable and the engine uses another exact route.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from judge_engine.loading.cache import cache_lock, engine_cache_dir, staged_file
from judge_engine.loading.cpu_info import host_cpu

SOURCE = Path(__file__).parent / "kernels" / "int8_avx2.c"
FLAGS = ("-O3", "-mavx2", "-shared", "-fPIC", "-pthread")
COMPILE_TIMEOUT_S = 120
ENTRY_POINT = "int8_avx2_matmul"


@dataclass(frozen=True)
class Kernel:
    """The loaded kernel, or why there is none (``function`` None)."""
    function: ctypes._CFuncPtr | None
    reason: str


def compiler() -> list[str] | None:
    """The C compiler command: ``$CC``, else the one Python was built with, else ``cc``, if it is on PATH."""
    for command in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc"):
        words = shlex.split(command or "")
        if words and shutil.which(words[0]):
            return words
    return None


@functools.lru_cache(maxsize=1)
def kernel() -> Kernel:
    """The kernel of this process, built (once per machine) and loaded on the first call."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return Kernel(None, f"not an x86-64 CPU ({platform.machine()})")
    if "avx2" not in host_cpu().flags:
        return Kernel(None, "this CPU lists no AVX2")
    command = compiler()
    if command is None:
        return Kernel(None, "no C compiler to build it ($CC, Python's, cc)")
    try:
        library = ctypes.CDLL(str(built_library(command)))
    except (OSError, subprocess.SubprocessError) as exc:
        return Kernel(None, f"it could not be built or loaded: {exc}")
    function = getattr(library, ENTRY_POINT)
    function.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 6 + [ctypes.c_int]
    function.restype = None
    return Kernel(function, "built from judge_engine/layers/kernels/int8_avx2.c")


def built_library(command: list[str]) -> Path:
    """The shared library for this source, flags and compiler: compiled into the engine cache unless there."""
    source = SOURCE.read_bytes()
    version = subprocess.run([*command, "--version"], capture_output=True, timeout=COMPILE_TIMEOUT_S).stdout
    key = hashlib.sha256(b"\0".join([source, " ".join(FLAGS).encode(), " ".join(command).encode(), version]))
    folder = engine_cache_dir() / "kernels"
    path = folder / f"int8_avx2-{key.hexdigest()[:16]}.so"
    with cache_lock(folder):
        if not path.is_file():
            with staged_file(path, prefix=".int8_avx2-") as staging:
                done = subprocess.run([*command, *FLAGS, str(SOURCE), "-o", str(staging)], capture_output=True,
                                      text=True, timeout=COMPILE_TIMEOUT_S)
                if done.returncode != 0:
                    raise OSError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return path


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Exact int32 ``a @ b`` of int8 ``a [M, K]`` and ``b [K, N]`` (a weight [N, K] read transposed, the engine's
    layout), every value of ``b`` in [-127, 127]. Raises RuntimeError where the kernel is unavailable."""
    function = kernel().function
    if function is None:
        raise RuntimeError(f"the AVX2 int8 kernel is unavailable: {kernel().reason}")
    if a.dtype != torch.int8 or b.dtype != torch.int8 or a.device.type != "cpu" or b.device.type != "cpu":
        raise ValueError("the AVX2 int8 kernel multiplies int8 CPU tensors")
    rows, depth = a.shape
    cols = b.shape[1]
    if b.shape[0] != depth:
        raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be multiplied")
    a = a if a.stride(1) == 1 else a.contiguous()
    weight = b.t() if b.stride(0) == 1 else b.t().contiguous()   # [N, K], K-contiguous
    out = torch.empty((rows, cols), dtype=torch.int32)
    if rows and cols:
        function(a.data_ptr(), weight.data_ptr(), out.data_ptr(), rows, cols, depth, a.stride(0), weight.stride(0),
                 out.stride(0), torch.get_num_threads())
    return out
