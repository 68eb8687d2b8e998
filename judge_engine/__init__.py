"""judge_engine: an in-process paged-attention inference engine (block-paged KV cache, prefix caching,
continuous batching with chunked prefill and preemption). Imports torch and transformers lazily, so that
`import judge_engine` stays cheap until an engine is built.

An LLM may be called from several threads at once (their requests share the engine's batches:
engine/step_sharing.py); an LLMEngine is driven by one thread at a time.
"""

from __future__ import annotations

import os

from judge_engine.lazy_exports import lazy_getattr

# Conditional numerical reproducibility keeps MKL on one code path whatever the alignment of the buffers, so a
# run repeats itself bit for bit. Batch invariance does not rest on it (it did not give it on AMD CPUs): every
# product runs in fixed-shape row tiles (judge_engine/layers/row_tiles.py). MKL reads it once, at its first
# call, so it is set here, before any matmul; a value chosen by the user is kept.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

__all__ = ["LLM", "LLMEngine", "SamplingParams", "RequestOutput", "RequestMetrics", "ScoreError",
           "Scored", "TokenUsage", "EngineConfig", "EngineConfigError", "catalog_models", "find_model",
           "CatalogModel", "CatalogError", "ModelFetchError", "PullProgress", "DEFAULT_MODEL", "pull_model",
           "model_is_pulled", "model_identity", "resolve_model_path", "EMBEDDED_MODEL_NAME", "cpu_numerics",
           "CpuNumerics"]

_EXPORTS = {
    "LLM": "judge_engine.llm",
    "LLMEngine": "judge_engine.engine.llm_engine",
    "SamplingParams": "judge_engine.engine.sampler",
    "RequestOutput": "judge_engine.outputs",
    "RequestMetrics": "judge_engine.outputs",
    "ScoreError": "judge_engine.outputs",
    "Scored": "judge_engine.outputs",
    "TokenUsage": "judge_engine.outputs",
    "EngineConfig": "judge_engine.config",
    "EngineConfigError": "judge_engine.config",
    # the model catalog and the weights' identity: what an application asks of models without loading one
    "catalog_models": "judge_engine.loading.catalog",
    "find_model": "judge_engine.loading.catalog",
    "CatalogModel": "judge_engine.loading.catalog",
    "CatalogError": "judge_engine.loading.catalog",
    "DEFAULT_MODEL": "judge_engine.loading.catalog",
    "ModelFetchError": "judge_engine.loading.catalog.pull",
    "PullProgress": "judge_engine.loading.catalog.pull",
    "pull_model": "judge_engine.loading.weights",
    "model_is_pulled": "judge_engine.loading.weights",
    "model_identity": "judge_engine.loading.weights",
    "resolve_model_path": "judge_engine.loading.weights",
    "EMBEDDED_MODEL_NAME": "judge_engine.loading.weights",
    # what a CPU engine computes with here, and why (the probes' choices)
    "cpu_numerics": "judge_engine.loading.numerics_report",
    "CpuNumerics": "judge_engine.loading.numerics_report",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS)
