"""Shared by every engine test: the default dtype is pinned to what a CPU without bfloat16 instructions gets.

The engine's default dtype follows the hardware (judge_engine/loading/dtype_choice.py): float32 on most CPUs, bfloat16
where its products are fast. These tests compare results with float32 references, so each of them must run in
float32 on every machine; the tests of the choice itself (test_dtype_choice.py) inject their own CPUs.
"""

from __future__ import annotations

import pytest

from judge_engine.loading import dtype_choice
from judge_engine.loading.cpu_info import CpuInfo

CPU_WITHOUT_BFLOAT16 = CpuInfo("x86-64 test CPU without bfloat16 instructions", frozenset({"sse4_2", "avx2", "fma"}))


@pytest.fixture(scope="session", autouse=True)
def cpu_without_fast_bfloat16():
    # session scope: module-scoped engines are built before any function-scoped fixture would run
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dtype_choice, "host_cpu", lambda: CPU_WITHOUT_BFLOAT16)
        yield CPU_WITHOUT_BFLOAT16
