"""Triton kernel that writes the new tokens' keys and values into the paged KV cache.

The cache of one layer is `[num_blocks, block_size, num_kv_heads, head_dim]`; a token's slot is
`block_id * block_size + offset`. Slot -1 marks a padding token, which must never be written: its row
may belong to a block that another sequence shares through the prefix cache.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _store_kv_kernel(
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    stride_kt, stride_kh, stride_kd,
    stride_vt, stride_vh, stride_vd,
    stride_kc_block, stride_kc_offset, stride_kc_head, stride_kc_dim,
    stride_vc_block, stride_vc_offset, stride_vc_head, stride_vc_dim,
    num_kv_heads, head_dim,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # One program per token moves all of its heads at once: [BLOCK_H, BLOCK_D] is one contiguous row.
    token = tl.program_id(0)
    slot = tl.load(slot_mapping_ptr + token)
    if slot < 0:
        return
    block_id = slot // BLOCK_SIZE
    offset = slot % BLOCK_SIZE

    heads = tl.arange(0, BLOCK_H)[:, None]
    dims = tl.arange(0, BLOCK_D)[None, :]
    mask = (heads < num_kv_heads) & (dims < head_dim)

    key = tl.load(k_ptr + token * stride_kt + heads * stride_kh + dims * stride_kd, mask=mask)
    value = tl.load(v_ptr + token * stride_vt + heads * stride_vh + dims * stride_vd, mask=mask)
    k_dst = (k_cache_ptr + block_id * stride_kc_block + offset * stride_kc_offset
             + heads * stride_kc_head + dims * stride_kc_dim)
    v_dst = (v_cache_ptr + block_id * stride_vc_block + offset * stride_vc_offset
             + heads * stride_vc_head + dims * stride_vc_dim)
    tl.store(k_dst, key.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_dst, value.to(v_cache_ptr.dtype.element_ty), mask=mask)


def store_kv(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write `k`, `v` ([T, Hkv, D]) into the caches at `slot_mapping` ([T], -1 = skip), in place."""
    num_tokens, num_kv_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    _check_cache(k, k_cache, "k_cache")
    _check_cache(v, v_cache, "v_cache")
    if slot_mapping.shape != (num_tokens,):
        raise ValueError(f"slot_mapping: expected shape ({num_tokens},), got {tuple(slot_mapping.shape)}")
    block_size = k_cache.shape[1]
    _store_kv_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        *k.stride(), *v.stride(), *k_cache.stride(), *v_cache.stride(),
        num_kv_heads, head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_H=triton.next_power_of_2(num_kv_heads),
        BLOCK_D=triton.next_power_of_2(head_dim),
    )


def _check_cache(new: torch.Tensor, cache: torch.Tensor, name: str) -> None:
    if cache.dim() != 4 or cache.shape[2:] != new.shape[1:]:
        raise ValueError(
            f"{name}: expected [num_blocks, block_size, {new.shape[1]}, {new.shape[2]}], got {tuple(cache.shape)}"
        )
    if cache.device != new.device:
        raise ValueError(f"{name}: on {cache.device}, but the new keys/values are on {new.device}")
