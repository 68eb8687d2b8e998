"""The default dtype follows the CPU, and an explicit bfloat16 where it is slow warns with the measured ratio.

Every CPU and every measurement here is injected, so each outcome is the same on whatever machine runs it.
"""

from __future__ import annotations

import logging

import pytest
import torch

from engine_fixtures import tiny_llama, tiny_llm  # noqa: F401
from judge_engine.loading import dtype_choice
from judge_engine.config import EngineConfig
from judge_engine.loading.cpu_info import CpuInfo, parse_cpuinfo
from judge_engine.loading.dtype_choice import MatmulSpeed, SlowDtypeWarning, choose_cpu_dtype, resolve_dtype

AVX2_EPYC = CpuInfo("AMD EPYC 7B12", frozenset({"sse4_2", "avx", "avx2", "fma"}))
ZEN4_EPYC = CpuInfo("AMD EPYC 9B14", frozenset({"avx2", "avx512f", "avx512_bf16"}))
SAPPHIRE_RAPIDS = CpuInfo("Intel Xeon Platinum 8481C", frozenset({"avx512f", "amx_tile", "amx_bf16"}))
UNKNOWN = CpuInfo("arm", frozenset())  # no /proc/cpuinfo (macOS, Windows)

SLOW = MatmulSpeed(float32_flops=137e9, bfloat16_flops=1.2e9)
FAST = MatmulSpeed(float32_flops=180e9, bfloat16_flops=360e9)
AT_PAR = MatmulSpeed(float32_flops=180e9, bfloat16_flops=200e9)


def never_measure() -> MatmulSpeed:
    raise AssertionError("the flags alone decide here: nothing should be measured")


def measured(speed: MatmulSpeed):
    calls = []

    def measure() -> MatmulSpeed:
        calls.append(speed)
        return speed
    return measure, calls


X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse4_2 avx avx2 avx512f avx512_bf16

processor\t: 1
model name\t: something else
flags\t\t: fpu
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd sve bf16 i8mm
CPU implementer\t: 0x41
"""


def test_cpuinfo_gives_the_first_processors_model_and_flags():
    cpu = parse_cpuinfo(X86_CPUINFO)
    assert cpu.model_name == "AMD EPYC 9B14"
    assert cpu.flags == {"fpu", "sse4_2", "avx", "avx2", "avx512f", "avx512_bf16"}
    arm = parse_cpuinfo(ARM_CPUINFO)
    assert "bf16" in arm.flags and "sve" in arm.flags and arm.model_name
    assert not parse_cpuinfo("").flags_known


def test_a_cpu_without_bfloat16_instructions_gets_float32_without_measuring():
    choice = choose_cpu_dtype(None, AVX2_EPYC, never_measure)
    assert choice.dtype == "float32" and choice.warning is None
    assert "AMD EPYC 7B12 has no bfloat16 matrix instructions" in choice.reason


@pytest.mark.parametrize("cpu", [ZEN4_EPYC, SAPPHIRE_RAPIDS, UNKNOWN], ids=["avx512_bf16", "amx_bf16", "no flags"])
def test_bfloat16_is_the_default_where_it_measures_fast(cpu):
    measure, calls = measured(FAST)
    choice = choose_cpu_dtype(None, cpu, measure)
    assert choice.dtype == "bfloat16" and len(calls) == 1
    assert "360.0 GFLOP/s against 180.0 in float32" in choice.reason


@pytest.mark.parametrize("speed", [AT_PAR, SLOW], ids=["at par", "slow"])
def test_a_flag_without_a_clear_measured_speedup_keeps_float32(speed):
    choice = choose_cpu_dtype(None, ZEN4_EPYC, measured(speed)[0])
    assert choice.dtype == "float32" and choice.warning is None


def test_unknown_flags_fall_back_to_the_measurement():
    assert choose_cpu_dtype(None, UNKNOWN, measured(SLOW)[0]).dtype == "float32"


def test_explicit_float32_is_kept_without_measuring():
    for cpu in (AVX2_EPYC, ZEN4_EPYC, UNKNOWN):
        assert choose_cpu_dtype("float32", cpu, never_measure) == dtype_choice.DtypeChoice("float32", "asked for")


def test_explicit_bfloat16_where_slow_is_kept_with_a_warning_that_gives_the_ratio():
    choice = choose_cpu_dtype("bfloat16", AVX2_EPYC, measured(SLOW)[0])
    assert choice.dtype == "bfloat16"
    assert choice.warning == ("dtype='bfloat16' on AMD EPYC 7B12: bfloat16 matrix products measured at 1.2 GFLOP/s "
                              "against 137.0 in float32 (114.2x slower); float32 (dtype='float32', or no dtype) "
                              "runs faster on this CPU")


def test_explicit_bfloat16_where_fast_does_not_warn():
    assert choose_cpu_dtype("bfloat16", ZEN4_EPYC, measured(FAST)[0]).warning is None


def test_resolve_dtype_warns_through_warnings_and_logging(monkeypatch, caplog):
    monkeypatch.setattr(dtype_choice, "host_cpu", lambda: AVX2_EPYC)
    monkeypatch.setattr(dtype_choice, "measure_matmul_speed", lambda: SLOW)
    with caplog.at_level(logging.WARNING, logger="judge_engine.loading.dtype_choice"), \
            pytest.warns(SlowDtypeWarning, match=r"114\.2x slower"):
        assert resolve_dtype("bfloat16", "cpu").dtype == "bfloat16"
    assert any("114.2x slower" in record.getMessage() for record in caplog.records)


def test_off_the_cpu_the_default_stays_float32_without_measuring(monkeypatch):
    monkeypatch.setattr(dtype_choice, "measure_matmul_speed", never_measure)
    assert resolve_dtype(None, "cuda").dtype == "float32"
    assert resolve_dtype("bfloat16", "cuda:1").dtype == "bfloat16"


@pytest.mark.parametrize("cpu, speed, expected", [(AVX2_EPYC, SLOW, "float32"), (ZEN4_EPYC, FAST, "bfloat16")])
def test_engine_config_resolves_the_default_and_auto(monkeypatch, cpu, speed, expected):
    monkeypatch.setattr(dtype_choice, "host_cpu", lambda: cpu)
    monkeypatch.setattr(dtype_choice, "measure_matmul_speed", lambda: speed)
    for requested in (None, "auto"):
        config = EngineConfig(dtype=requested)
        assert config.dtype == expected and config.dtype_reason
    assert EngineConfig(dtype="fp32").dtype == "float32"


def test_the_engine_computes_in_the_chosen_dtype(monkeypatch, tiny_llama):
    monkeypatch.setattr(dtype_choice, "host_cpu", lambda: ZEN4_EPYC)
    monkeypatch.setattr(dtype_choice, "measure_matmul_speed", lambda: FAST)
    llm = tiny_llm(tiny_llama, dtype=None)   # no dtype asked: the engine's own choice
    assert llm.engine.config.dtype == "bfloat16"
    assert llm.engine.model.embed_tokens.dtype == torch.bfloat16
    assert llm.engine.kv_storage.dtype == torch.bfloat16
    (lps,) = llm.score([[5, 6, 7, 8]], [[9], [10]])
    assert all(value < 0 for value in lps)


def test_the_measurement_times_both_types():
    speed = dtype_choice.measure_matmul_speed.__wrapped__(rows=32, size=64, repeats=1)
    assert speed.float32_flops > 0 and speed.bfloat16_flops > 0
