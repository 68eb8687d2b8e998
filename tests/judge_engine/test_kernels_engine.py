"""The engine with the Triton kernels forced on gives the torch path's logits, on the embedded model.

The kernels run under the Triton interpreter on the CPU; TRITON_INTERPRET must be set before
judge_engine.layers.kernels is first imported, so the comparison runs in a subprocess (this file as a script).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOLERANCE = 2e-3
MAX_TOKENS = 3
# The second batch repeats the first prompt's opening (more than one 16-token block), so its prefill
# starts from a prefix-cache hit: queries shorter than their context.
SHARED = "You are a strict grader. Read the answer and say whether it meets the criterion. "
FIRST_BATCH = [SHARED + "Answer: 42.", "Hi", "The capital of France is"]
SECOND_BATCH = [SHARED + "Answer: the total is 17 dollars.", "Count: one, two, three,"]


def _run_engine(backend: str) -> dict:
    import torch

    from judge_engine import LLM, SamplingParams

    torch.set_num_threads(min(2, torch.get_num_threads()))
    # float32 on both backends: without a dtype the engine times bfloat16 against float32 at start-up on CPUs
    # with bfloat16 instructions, and on a loaded machine the two runs could compute in different types
    llm = LLM(model=None, attention_backend=backend, max_num_batched_tokens=512, dtype="float32")
    chosen = llm.engine.model.attention_backend.name
    params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, return_logits=True)
    outputs = llm.generate(FIRST_BATCH, params) + llm.generate(SECOND_BATCH, params)
    return {
        "backend": chosen,
        "token_ids": [list(out.token_ids) for out in outputs],
        "logits": [out.logits for out in outputs],
        "cached_prompt_tokens": llm.stats()["cached_prompt_tokens"],
    }


def _compare() -> dict:
    reference = _run_engine("torch")
    kernels = _run_engine("triton")
    errors = [(a - b).abs().max().item() for a, b in zip(kernels["logits"], reference["logits"])]
    return {
        "backends": [reference["backend"], kernels["backend"]],
        "same_tokens": kernels["token_ids"] == reference["token_ids"],
        "logit_rows": [int(t.shape[0]) for t in kernels["logits"]],
        "max_abs_error": max(errors),
        "cached_prompt_tokens": kernels["cached_prompt_tokens"],
    }


@pytest.mark.slow
def test_engine_logits_match_torch_path_with_kernels_forced_on():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=1500,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, f"engine comparison failed:\n{(done.stdout + done.stderr)[-6000:]}"
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(report)
    assert report["backends"] == ["torch", "triton"], report
    assert report["cached_prompt_tokens"] > 0, "the second batch must start from a prefix-cache hit"
    assert all(rows >= 1 for rows in report["logit_rows"]), report
    assert report["max_abs_error"] <= TOLERANCE, report
    assert report["same_tokens"], report


if __name__ == "__main__":
    print(json.dumps(_compare()))
