"""judge_engine: an in-process paged-attention inference engine (block-paged KV cache, prefix caching,
continuous batching with chunked prefill and preemption). Imports torch and transformers lazily, so that
`import judge_engine` stays cheap until an engine is built.

One thread drives an engine: LLM and LLMEngine are not thread-safe.
"""

from __future__ import annotations

import os

# MKL picks its matmul kernel (and so its summation order) from the matrix shapes and the thread count,
# so a token's activations would change in the last bits with the number of other tokens in the step.
# Conditional numerical reproducibility in strict mode makes each row's result independent of the others
# (measured: no slower than MKL's default choice on this model's shapes). MKL reads it once, at its first
# call, so it is set here, before any matmul; a value chosen by the user is kept.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

__all__ = ["LLM", "LLMEngine", "SamplingParams", "RequestOutput", "RequestMetrics", "ScoreError",
           "EngineConfig"]

_EXPORTS = {
    "LLM": "judge_engine.llm",
    "LLMEngine": "judge_engine.engine",
    "SamplingParams": "judge_engine.sampler",
    "RequestOutput": "judge_engine.outputs",
    "RequestMetrics": "judge_engine.outputs",
    "ScoreError": "judge_engine.outputs",
    "EngineConfig": "judge_engine.config",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'judge_engine' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
