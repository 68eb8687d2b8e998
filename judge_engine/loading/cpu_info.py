"""The CPU this process runs on: its model name and feature flags, as the kernel lists them in /proc/cpuinfo.

x86 kernels list the instruction-set extensions under "flags" and name the CPU under "model name"; arm64 kernels
list them under "Features" and name no model. Elsewhere (macOS, Windows) nothing is read and the flags are empty,
which callers treat as "unknown", not as "none".
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

CPUINFO_PATH = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuInfo:
    model_name: str
    flags: frozenset[str]

    @property
    def flags_known(self) -> bool:
        return bool(self.flags)

    def describe(self) -> str:
        """The model and the flags that decide matrix-product speed (the rest of /proc/cpuinfo's flags are noise)."""
        relevant = sorted(f for f in self.flags if f.startswith(("avx", "amx", "fma", "sve"))
                          or f in ("bf16", "asimd", "i8mm", "f16c"))
        return f"{self.model_name} ({' '.join(relevant) or 'flags unknown'})"


def parse_cpuinfo(text: str) -> CpuInfo:
    """The first processor's model name and flags from /proc/cpuinfo's text (every core lists the same)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the end of the first processor's stanza
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    flags = fields.get("flags") or fields.get("features") or ""
    model = fields.get("model name") or fields.get("cpu model") or fields.get("hardware") or ""
    return CpuInfo(model or platform.processor() or platform.machine(), frozenset(flags.split()))


@functools.lru_cache(maxsize=1)
def host_cpu() -> CpuInfo:
    """This machine's CPU (read once per process: it does not change while we run)."""
    try:
        text = CPUINFO_PATH.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return CpuInfo(platform.processor() or platform.machine(), frozenset())
    return parse_cpuinfo(text)
