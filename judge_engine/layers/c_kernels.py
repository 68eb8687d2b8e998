"""C kernels of the engine (``kernels/*.c``), built once per machine with its C compiler and loaded with ctypes.

A kernel's shared library is compiled from its source with the machine's C compiler (``$CC``, else Python's, else
``cc``) at its first use in a process, into ``<engine cache>/kernels/`` under a name keyed by the source, the
headers beside it, the flags and the compiler, and loaded with ctypes (which releases the GIL during a call). Every
kernel here needs AVX2 (float_gemm.c FMA too; int8_groups_vnni.c AVX-512 VNNI, asked for by its functions' target
attributes): on another CPU, without a C compiler, or where the build fails, it is unavailable with the reason, and
its caller takes another route. Each kernel module (int8_avx2.py, int8_vnni.py, int8_activations.py,
block_weight.py's rebuilding, float_gemm.py, row_attention.py, log_softmax.py, rope.py) declares its source, entry
point, argument types and the CPU flags it needs, and calls ``load``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from judge_engine.loading.cache import cache_lock, engine_cache_dir, staged_file
from judge_engine.loading.cpu_info import host_cpu

SOURCES = Path(__file__).parent / "kernels"
# -ffp-contract=off: a kernel's float multiply and add stay two roundings, as torch's, never one fused (-mfma only
# makes the fused instruction available to the kernel that asks for it by name, float_gemm.c)
FLAGS = ("-O3", "-mavx2", "-mfma", "-ffp-contract=off", "-shared", "-fPIC", "-pthread")
COMPILE_TIMEOUT_S = 120
# The grouped int8 products' entry points (int8_groups_vnni.c, int8_groups_avx2.c): a, lda, scales, lds,
# rows, depth, group, w, ldw, weight_scales, ldws, c, ldc, cols, threads; they return 0, or -1 for a group they do
# not take
GROUPED_INT8_ARGUMENTS = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]


@dataclass(frozen=True)
class Kernel:
    """A loaded kernel, or why there is none (``function`` None)."""
    function: ctypes._CFuncPtr | None
    reason: str


def compiler() -> list[str] | None:
    """The C compiler command: ``$CC``, else the one Python was built with, else ``cc``, if it is on PATH."""
    for command in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc"):
        words = shlex.split(command or "")
        if words and shutil.which(words[0]):
            return words
    return None


def load(source_name: str, entry_point: str, argtypes: list, needs: tuple[str, ...] = ("avx2",),
         restype=None, off_switch: tuple[str, str] | None = None) -> Kernel:
    """The function ``entry_point`` of ``kernels/<source_name>``, built here unless built before; ``needs``: the CPU
    flags (as /proc/cpuinfo spells them) its instructions need; ``restype``: its return type (None: void);
    ``off_switch``: (variable, value): none where the environment sets the variable to that value (any case)."""
    if off_switch is not None and os.environ.get(off_switch[0], "").strip().lower() == off_switch[1]:
        return Kernel(None, f"{off_switch[0]}={off_switch[1]}")
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return Kernel(None, f"not an x86-64 CPU ({platform.machine()})")
    missing = [flag for flag in needs if flag not in host_cpu().flags]
    if missing:
        return Kernel(None, f"this CPU lists no {', '.join(flag.upper() for flag in missing)}")
    command = compiler()
    if command is None:
        return Kernel(None, "no C compiler to build it ($CC, Python's, cc)")
    try:
        library = ctypes.CDLL(str(built_library(command, SOURCES / source_name)))
    except (OSError, subprocess.SubprocessError) as exc:
        return Kernel(None, f"it could not be built or loaded: {exc}")
    function = getattr(library, entry_point)
    function.argtypes = argtypes
    function.restype = restype
    return Kernel(function, f"built from judge_engine/layers/kernels/{source_name}")


def built_library(command: list[str], source_path: Path) -> Path:
    """The shared library for this source, flags and compiler: compiled into the engine cache unless there."""
    source = b"\0".join(path.read_bytes() for path in [source_path, *sorted(source_path.parent.glob("*.h"))])
    version = subprocess.run([*command, "--version"], capture_output=True, timeout=COMPILE_TIMEOUT_S).stdout
    key = hashlib.sha256(b"\0".join([source, " ".join(FLAGS).encode(), " ".join(command).encode(), version]))
    folder = engine_cache_dir() / "kernels"
    path = folder / f"{source_path.stem}-{key.hexdigest()[:16]}.so"
    with cache_lock(folder):
        if not path.is_file():
            with staged_file(path, prefix=f".{source_path.stem}-") as staging:
                done = subprocess.run([*command, *FLAGS, str(source_path), "-o", str(staging)], capture_output=True,
                                      text=True, timeout=COMPILE_TIMEOUT_S)
                if done.returncode != 0:
                    raise OSError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return path
