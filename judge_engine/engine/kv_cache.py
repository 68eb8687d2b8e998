"""Sizing and the single start-up allocation of the paged KV cache (never resized afterwards)."""

from __future__ import annotations

import math

import torch

from judge_engine.config import DEFAULT_CPU_KV_CACHE_BYTES, EngineConfig


class KVCacheTooSmall(RuntimeError):
    """The memory budget does not hold even one block."""


def bytes_per_block(spec, block_size: int, dtype: torch.dtype) -> int:
    element = torch.empty((), dtype=dtype).element_size()
    return 2 * spec.num_layers * block_size * spec.num_kv_heads * spec.head_dim * element


def cpu_num_blocks(config: EngineConfig, spec) -> int:
    budget = config.kv_cache_bytes or DEFAULT_CPU_KV_CACHE_BYTES
    return _blocks_in(budget, spec, config)


def cuda_num_blocks(config: EngineConfig, spec, warm_up) -> int:
    """Blocks that fit in gpu_memory_utilization of the device once the weights are loaded and a warm-up
    step of max_num_batched_tokens has shown the peak activation memory (kv_cache_bytes overrides)."""
    if config.kv_cache_bytes is not None:
        return _blocks_in(config.kv_cache_bytes, spec, config)
    device = torch.device(config.device)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    warm_up()
    torch.cuda.synchronize(device)
    activation_peak = torch.cuda.max_memory_allocated(device) - before
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(device)
    budget = int(total * config.gpu_memory_utilization) - (total - free) - activation_peak
    return _blocks_in(budget, spec, config)


def _blocks_in(budget: int, spec, config: EngineConfig) -> int:
    per_block = bytes_per_block(spec, config.block_size, config.torch_dtype)
    num_blocks = budget // per_block if budget > 0 else 0
    if num_blocks < 1:
        raise KVCacheTooSmall(
            f"kv_cache_bytes: {budget} bytes hold no KV block of {per_block} bytes "
            f"(block_size={config.block_size}, {spec.num_layers} layers)")
    return int(num_blocks)


def allocate_kv_cache(spec, num_blocks: int, block_size: int, dtype: torch.dtype,
                      device: torch.device) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """One tensor [2, layers, blocks, block_size, kv_heads, head_dim] and each layer's (K, V) views of it.
    Zeroed so that never-written slots hold finite values (they are masked, but NaN * 0 is NaN)."""
    shape = (2, spec.num_layers, num_blocks, block_size, spec.num_kv_heads, spec.head_dim)
    if torch.device(device).type == "cpu":
        storage = zeroed_on_demand(shape, dtype)
    else:
        storage = torch.zeros(shape, dtype=dtype, device=device)
    return storage, [(storage[0, layer], storage[1, layer]) for layer in range(spec.num_layers)]


def zeroed_on_demand(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A zeroed CPU tensor whose pages cost memory only once written: calloc (numpy's zeros) maps fresh pages that
    the kernel zeroes on first touch, where torch.zeros writes every byte at once. A 512 MiB KV cache of which a
    judging workload fills a fifth then costs a fifth."""
    import numpy as np

    element = torch.empty((), dtype=dtype).element_size()
    return torch.from_numpy(np.zeros(math.prod(shape) * element, dtype=np.uint8)).view(dtype).view(shape)


def copy_blocks(kv_caches: list[tuple[torch.Tensor, torch.Tensor]], pairs: list[tuple[int, int]]) -> None:
    """Copy on write: each (source, destination) block's keys and values, in every layer, into the destination
    (a forked sample's own copy of a block it shares and is about to write into)."""
    if not pairs:
        return
    device = kv_caches[0][0].device
    sources = torch.tensor([source for source, _ in pairs], dtype=torch.int64, device=device)
    destinations = torch.tensor([destination for _, destination in pairs], dtype=torch.int64, device=device)
    for keys, values in kv_caches:
        keys[destinations] = keys[sources]
        values[destinations] = values[sources]
