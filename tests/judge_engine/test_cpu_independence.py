"""The embedded judge's log-probabilities are the same bits whichever SIMD width torch's CPU kernels run at.

Each width torch can run on this CPU (ATen's ``ATEN_CPU_CAPABILITY``: avx2, and avx512 where the CPU has it) stands
for a CPU that has only that width: a child process runs the real SmolLM2-135M at that width, in float32 and with
int8 linear maps, scores prompts long enough to read keys before their own attention segment, and prints the
log-probabilities' bits. With torch's flash attention and log_softmax they differed by up to 0.16 (int8) between
avx2 and avx512 (docs/benchmarks.md); with the engine's own kernels (judge_engine/layers/attention/row_attention.py,
judge_engine/layers/log_softmax.py) they must not differ at all. Skipped where this CPU runs one width only (no
AVX-512: there is nothing to compare) or the kernels cannot be built."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from judge_engine.layers.attention import row_attention
from judge_engine.layers.log_softmax import kernel as log_softmax_kernel

CHILD = """
import json, sys, torch
from judge_engine import LLM
torch.set_num_threads(1)
prompts = ["Question: did the agent email the CFO the quarterly numbers before Friday? " * 12 + "Answer:",
           "The total travel spend is 48.2L, within the 50L budget. " * 20 + "Is the budget met? Answer:",
           "Short prompt. Answer:"]
result = {"capability": torch.backends.cpu.get_cpu_capability()}
for quantization in (None, "int8"):
    llm = LLM(None, dtype="float32", quantization=quantization)
    scores = llm.score(prompts, [" yes", " no"])
    result[str(quantization)] = {"kernels": llm.softmax_kernels,
                                 "logprobs": [[value.hex() for value in row] for row in scores]}
print(json.dumps(result))
"""


def widths_here() -> list[str]:
    own = torch.backends.cpu.get_cpu_capability().lower()
    return {"avx512": ["avx2", "avx512"], "avx2": ["avx2"]}.get(own, [])


def run_at(width: str) -> dict:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": width}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_judges_log_probabilities_are_the_same_bits_at_every_simd_width():
    for kernel in (row_attention.kernel(), log_softmax_kernel()):
        if kernel.function is None:
            pytest.skip(f"the engine's softmax kernels are unavailable here: {kernel.reason}")
    widths = widths_here()
    if len(widths) < 2:
        pytest.skip(f"this CPU runs torch's kernels at one SIMD width ({torch.backends.cpu.get_cpu_capability()}): "
                    "nothing to compare")
    results = {width: run_at(width) for width in widths}
    for width, result in results.items():
        assert result["capability"].lower() == width
        assert result["None"]["kernels"] and result["int8"]["kernels"]
    first, *others = widths
    for other in others:
        for quantization in ("None", "int8"):
            assert results[other][quantization]["logprobs"] == results[first][quantization]["logprobs"], (
                f"{quantization}: {other} differs from {first}")
