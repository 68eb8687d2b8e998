"""Triton paged-attention kernels, with the same signatures as judge_engine.layers.attention.torch_paged.

On a CUDA device the engine runs attention through these; on the CPU they run only under the Triton
interpreter (TRITON_INTERPRET=1, set before this package is imported), which the tests use.
"""

from __future__ import annotations

import torch

from judge_engine.layers.kernels.decode_attention import decode_attention
from judge_engine.layers.kernels.prefill_attention import prefill_attention
from judge_engine.layers.kernels.store_kv import store_kv

__all__ = ["store_kv", "paged_attention", "decode_attention", "prefill_attention"]


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta, scale: float,
                    window: int | None = None, softcap: float | None = None) -> torch.Tensor:
    """q: [T, Hq, D] -> [T, Hq, D]; `meta` is a judge_engine.layers.attention.metadata.AttentionMetadata.

    Rows of `q` past cu_seqlens_q[-1] (padding) come back as zeros. window: each query sees only the last
    `window` keys up to its own position; softcap: scores become softcap * tanh(score / softcap).
    """
    _check_shapes(q, k_cache, v_cache)
    if window is not None and window < 1:
        raise ValueError(f"paged_attention: window must be a positive number of keys, got {window}")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"paged_attention: softcap must be positive, got {softcap}")
    options = dict(window=window or 0, softcap=softcap or 0.0)
    out = torch.zeros_like(q)
    if meta.is_decode:
        return decode_attention(q, k_cache, v_cache, meta.cu_seqlens_q, meta.context_lens,
                                meta.block_tables, meta.max_context_len, scale, out, **options)
    return prefill_attention(q, k_cache, v_cache, meta.cu_seqlens_q, meta.context_lens,
                             meta.block_tables, meta.max_seqlen_q, scale, out, **options)


def _check_shapes(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    if q.dim() != 3 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(
            f"paged_attention: expected q [T, Hq, D] and caches [blocks, block_size, Hkv, D]; "
            f"got q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}"
        )
    num_q_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = k_cache.shape[2]
    if k_cache.shape[3] != head_dim or num_q_heads % num_kv_heads:
        raise ValueError(
            f"paged_attention: {num_q_heads} query heads of dim {head_dim} do not map onto "
            f"{num_kv_heads} kv heads of dim {k_cache.shape[3]}"
        )
