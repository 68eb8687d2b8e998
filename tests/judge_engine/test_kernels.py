"""Triton kernels against the torch paged path and a dense float64 reference, on the CPU.

Triton decides at decoration time whether a kernel is interpreted, so TRITON_INTERPRET=1 must be set
before judge_engine.layers.kernels is first imported. Another test module may import it earlier in the same
process, so the cases run in a fresh pytest subprocess: the plain pytest run sees two wrapper tests
(interpreted cases; an ahead-of-time compile for sm_80/sm_90 that catches kernels that only the
interpreter accepts), and each subprocess sees the cases of its mode.
To run the interpreted cases directly:
    KERNEL_TEST_MODE=interpret TRITON_INTERPRET=1 pytest tests/judge_engine/test_kernels.py
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

MODE_VAR = "KERNEL_TEST_MODE"
MODE = os.environ.get(MODE_VAR)
if MODE == "interpret":
    os.environ["TRITON_INTERPRET"] = "1"
elif MODE == "compile":
    os.environ["TRITON_INTERPRET"] = "0"

triton = pytest.importorskip("triton")
import torch  # noqa: E402

torch.set_num_threads(min(2, torch.get_num_threads()))


def _run_mode(mode: str, timeout: int) -> str:
    """Run this file's cases of `mode` in a fresh pytest process; return its summary line."""
    env = dict(os.environ, **{MODE_VAR: mode, "TRITON_INTERPRET": "1" if mode == "interpret" else "0"})
    command = [sys.executable, "-m", "pytest", __file__, "-q", "-o", "addopts=", "-p", "no:cacheprovider",
               "-W", "ignore::UserWarning"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=Path(__file__).resolve().parents[2])
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"kernel cases ({mode}) failed:\n{output[-6000:]}"
    summary = output.strip().splitlines()[-1]
    print(f"{mode}: {summary}")
    return summary


if MODE is None:

    def test_kernels_match_torch_path_under_interpreter():
        summary = _run_mode("interpret", timeout=900)
        assert "passed" in summary and "skipped" not in summary, summary

    def test_kernels_compile_for_gpu():
        summary = _run_mode("compile", timeout=600)
        if "passed" not in summary:
            pytest.skip(f"no kernel compiled: {summary}")


# ---------------------------------------------------------------------------------------------------
# Cases, in a subprocess of the right mode.

@dataclass
class Batch:
    """A flat batch of new tokens over a paged cache whose prefixes were cached by earlier steps."""

    q: torch.Tensor              # [T, Hq, D]; rows past the last sequence are padding
    new_k: torch.Tensor          # [T, Hkv, D], the new tokens' keys, padding rows included
    new_v: torch.Tensor
    k_cache: torch.Tensor        # prefix written, new tokens not yet stored
    v_cache: torch.Tensor
    meta: object                 # AttentionMetadata
    keys: list[torch.Tensor]     # per sequence, [context_len, Hkv, D]: what the cache must hold after store_kv
    values: list[torch.Tensor]
    query_lens: list[int]


def _make_batch(query_lens, context_lens, *, block_size, num_kv_heads, group, head_dim, padding=0, seed=0):
    from judge_engine.layers.attention.metadata import AttentionMetadata

    gen = torch.Generator().manual_seed(seed)
    blocks_per_seq = [-(-n // block_size) for n in context_lens]
    num_blocks = sum(blocks_per_seq) + 3
    # Shuffled block ids, so a kernel that assumes contiguous blocks or ignores the table reads garbage.
    free = torch.randperm(num_blocks, generator=gen).tolist()
    max_blocks = max(blocks_per_seq) + 1
    block_tables = torch.full((len(context_lens), max_blocks), -1, dtype=torch.int32)
    for b, count in enumerate(blocks_per_seq):
        block_tables[b, :count] = torch.tensor([free.pop() for _ in range(count)], dtype=torch.int32)

    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=gen)  # noise everywhere that no sequence owns
    v_cache = torch.randn(shape, generator=gen)
    keys = [torch.randn(n, num_kv_heads, head_dim, generator=gen) for n in context_lens]
    values = [torch.randn(n, num_kv_heads, head_dim, generator=gen) for n in context_lens]
    slots, new_k, new_v = [], [], []
    for b, (q_len, n) in enumerate(zip(query_lens, context_lens)):
        positions = torch.arange(n)
        seq_slots = block_tables[b, positions // block_size].long() * block_size + positions % block_size
        prefix = n - q_len
        k_cache.view(-1, num_kv_heads, head_dim)[seq_slots[:prefix]] = keys[b][:prefix]
        v_cache.view(-1, num_kv_heads, head_dim)[seq_slots[:prefix]] = values[b][:prefix]
        slots.append(seq_slots[prefix:])
        new_k.append(keys[b][prefix:])
        new_v.append(values[b][prefix:])
    slots.append(torch.full((padding,), -1, dtype=torch.long))
    new_k.append(torch.randn(padding, num_kv_heads, head_dim, generator=gen))
    new_v.append(torch.randn(padding, num_kv_heads, head_dim, generator=gen))
    cu_seqlens = torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32)
    meta = AttentionMetadata(
        slot_mapping=torch.cat(slots),
        cu_seqlens_q=cu_seqlens,
        context_lens=torch.tensor(context_lens, dtype=torch.int32),
        block_tables=block_tables,
        max_seqlen_q=max(query_lens),
        max_context_len=max(context_lens),
        is_decode=all(n == 1 for n in query_lens),
    )
    q = torch.randn(sum(query_lens) + padding, num_kv_heads * group, head_dim, generator=gen)
    return Batch(q, torch.cat(new_k), torch.cat(new_v), k_cache, v_cache, meta, keys, values, list(query_lens))


def _dense_reference(batch: Batch, scale: float) -> torch.Tensor:
    """Causal (bottom-right) attention per sequence in float64, straight from the source keys: no cache."""
    out = torch.zeros(batch.q.shape, dtype=torch.float64)
    start = 0
    for keys, values, q_len in zip(batch.keys, batch.values, batch.query_lens):
        q = batch.q[start:start + q_len].double()
        group = q.shape[1] // keys.shape[1]
        k = keys.double().repeat_interleave(group, dim=1)
        v = values.double().repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        context_len = k.shape[0]
        query_pos = torch.arange(context_len - q_len, context_len)
        visible = torch.arange(context_len)[None, :] <= query_pos[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
        out[start:start + q_len] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v)
        start += q_len
    return out


def _assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str, atol: float = 2e-3) -> None:
    error = (actual.double() - expected.double()).abs().max().item()
    assert error <= atol, f"{what}: max abs error {error:.3g} > {atol}"


def _run_attention(batch: Batch, kernel_module, torch_module) -> None:
    """Store the new tokens and attend with the kernels; compare with both references."""
    from judge_engine.layers import kernels

    head_dim = batch.q.shape[2]
    scale = 1 / math.sqrt(head_dim)
    reference_k, reference_v = batch.k_cache.clone(), batch.v_cache.clone()
    torch_module.store_kv(batch.new_k, batch.new_v, reference_k, reference_v, batch.meta.slot_mapping)
    kernels.store_kv(batch.new_k, batch.new_v, batch.k_cache, batch.v_cache, batch.meta.slot_mapping)
    assert torch.equal(batch.k_cache, reference_k) and torch.equal(batch.v_cache, reference_v)

    out = kernel_module(batch.q, batch.k_cache, batch.v_cache, batch.meta, scale)
    assert out.shape == batch.q.shape and out.dtype == batch.q.dtype
    _assert_close(out, _dense_reference(batch, scale), "kernel vs dense float64 reference")
    expected = torch_module.paged_attention(batch.q, batch.k_cache, batch.v_cache, batch.meta, scale)
    _assert_close(out, expected, "kernel vs torch_paged")
    num_real = int(batch.meta.cu_seqlens_q[-1])
    assert torch.count_nonzero(out[num_real:]) == 0, "padding rows must come back as zeros"


if MODE == "interpret":
    from judge_engine.layers import kernels
    from judge_engine.layers.attention import torch_paged

    # (block_size, num_kv_heads, group, head_dim): every value of each axis appears, not the full product.
    LAYOUTS = [
        (16, 2, 1, 64),
        (16, 1, 3, 128),
        (16, 2, 4, 64),
        (32, 2, 3, 64),
        (32, 1, 4, 128),
        (32, 2, 1, 128),
    ]

    @pytest.mark.parametrize("block_size,num_kv_heads,group,head_dim", LAYOUTS)
    def test_prefill_ragged_with_prefix_hits(block_size, num_kv_heads, group, head_dim):
        # A fresh prompt ending mid-block, a one-token chunk, a prefix hit ending mid-block, and a chunk
        # longer than one query tile on top of a cached prefix; two padding tokens at the end.
        query_lens = [block_size + 5, 1, 7, 2 * block_size + 3]
        context_lens = [block_size + 5, 9, 2 * block_size + 7, 3 * block_size + 3]
        batch = _make_batch(query_lens, context_lens, block_size=block_size, num_kv_heads=num_kv_heads,
                            group=group, head_dim=head_dim, padding=2, seed=block_size + group + head_dim)
        assert not batch.meta.is_decode
        _run_attention(batch, kernels.paged_attention, torch_paged)

    @pytest.mark.parametrize("block_size,num_kv_heads,group,head_dim", LAYOUTS)
    def test_decode_one_token_per_sequence(block_size, num_kv_heads, group, head_dim):
        # Contexts of 1 key, exactly one block, one key into a new block, mid-block, several blocks.
        context_lens = [1, block_size, block_size + 1, 2 * block_size + 5, 4 * block_size - 3]
        batch = _make_batch([1] * len(context_lens), context_lens, block_size=block_size,
                            num_kv_heads=num_kv_heads, group=group, head_dim=head_dim, seed=head_dim - group)
        assert batch.meta.is_decode
        _run_attention(batch, kernels.paged_attention, torch_paged)

    @pytest.mark.parametrize("block_size,group,head_dim,num_partitions", [(16, 3, 64, 3), (32, 4, 128, 5)])
    def test_decode_split_into_partitions(block_size, group, head_dim, num_partitions):
        # The flash-decoding path a GPU takes for few long sequences: partial softmaxes merged. The short
        # sequences leave the later partitions empty, which must weigh nothing.
        from judge_engine.layers.kernels import decode_attention

        context_lens = [1, block_size - 3, 3 * block_size + 1, 6 * block_size + 7]
        batch = _make_batch([1] * len(context_lens), context_lens, block_size=block_size, num_kv_heads=2,
                            group=group, head_dim=head_dim, seed=num_partitions)

        def split_attention(q, k_cache, v_cache, meta, scale):
            out = torch.zeros_like(q)
            return decode_attention(q, k_cache, v_cache, meta.cu_seqlens_q, meta.context_lens, meta.block_tables,
                                    meta.max_context_len, scale, out, num_partitions=num_partitions)

        _run_attention(batch, split_attention, torch_paged)

    @pytest.mark.parametrize("block_size", [8, 24, 64])
    def test_block_sizes_off_the_tile_size(block_size):
        # 8 is below tl.dot's 16 (a key tile spans two blocks); 64 exceeds the float32 key tile (a block
        # spans two tiles); 24 is no power of two (tiles and blocks drift against each other).
        for query_lens, context_lens in (([3, 1, 20], [3, 70, 90]), ([1, 1], [5, 100])):
            batch = _make_batch(query_lens, context_lens, block_size=block_size, num_kv_heads=2, group=3,
                                head_dim=64, seed=block_size)
            _run_attention(batch, kernels.paged_attention, torch_paged)

    def test_prefill_of_single_tokens_is_not_the_decode_kernel():
        # is_decode False with one token per sequence still goes through the prefill kernel: same answer.
        batch = _make_batch([1, 1, 1], [1, 17, 40], block_size=16, num_kv_heads=2, group=4, head_dim=64, seed=3)
        batch.meta.is_decode = False
        _run_attention(batch, kernels.paged_attention, torch_paged)

    @pytest.mark.parametrize("block_size,num_kv_heads,head_dim", [(16, 2, 64), (32, 3, 128), (16, 5, 80)])
    def test_store_kv_writes_slots_and_skips_padding(block_size, num_kv_heads, head_dim):
        gen = torch.Generator().manual_seed(block_size + head_dim)
        num_blocks = 6
        shape = (num_blocks, block_size, num_kv_heads, head_dim)
        k_cache, v_cache = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
        slots = torch.randperm(num_blocks * block_size, generator=gen)[:20]
        slots[[0, 7, 19]] = -1
        # Non-contiguous inputs, as the engine gets them from a fused qkv projection.
        fused = torch.randn(20, 2 * num_kv_heads, head_dim, generator=gen)
        k, v = fused[:, :num_kv_heads], fused[:, num_kv_heads:]
        expected_k, expected_v = k_cache.clone(), v_cache.clone()
        keep = slots >= 0
        expected_k.view(-1, num_kv_heads, head_dim)[slots[keep]] = k[keep]
        expected_v.view(-1, num_kv_heads, head_dim)[slots[keep]] = v[keep]
        kernels.store_kv(k, v, k_cache, v_cache, slots)
        assert torch.equal(k_cache, expected_k)
        assert torch.equal(v_cache, expected_v)

    def test_rejects_shapes_that_do_not_fit():
        q = torch.zeros(2, 6, 64)
        cache = torch.zeros(4, 16, 4, 64)
        batch = _make_batch([1, 1], [3, 4], block_size=16, num_kv_heads=4, group=1, head_dim=64)
        with pytest.raises(ValueError, match="query heads"):
            kernels.paged_attention(q, cache, cache, batch.meta, 0.125)
        with pytest.raises(ValueError, match="kv heads of dim 64"):
            kernels.paged_attention(torch.zeros(2, 4, 32), cache, cache, batch.meta, 0.125)
        with pytest.raises(ValueError, match="k_cache"):
            kernels.store_kv(torch.zeros(2, 2, 64), torch.zeros(2, 2, 64), cache, cache, torch.zeros(2).long())


if MODE == "compile":
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import judge_engine.layers.kernels  # noqa: F401  (registers the submodules in sys.modules)

    _MODULES = {name: sys.modules[f"judge_engine.layers.kernels.{name}"]
                for name in ("store_kv", "decode_attention", "prefill_attention")}
    _FIXED_POINTERS = {"slot_mapping_ptr": "*i64", "cu_seqlens_q_ptr": "*i32", "context_lens_ptr": "*i32",
                       "block_tables_ptr": "*i32", "partial_out_ptr": "*fp32", "partial_max_ptr": "*fp32",
                       "partial_sum_ptr": "*fp32"}

    def _signature(kernel, element: str, constexprs: dict) -> dict:
        signature = {}
        for name in kernel.arg_names:
            if name in constexprs:
                signature[name] = "constexpr"
            elif name in _FIXED_POINTERS:
                signature[name] = _FIXED_POINTERS[name]
            elif name.endswith("_ptr"):
                signature[name] = f"*{element}"
            else:
                signature[name] = "fp32" if name == "qk_scale_log2" else "i32"
        return signature

    def _compile(module: str, kernel_name: str, element: str, constexprs: dict, arch: int):
        if "nvidia" not in triton.backends.backends:
            pytest.skip("this triton build has no CUDA backend")
        kernel = getattr(_MODULES[module], kernel_name)
        source = ASTSource(kernel, _signature(kernel, element, constexprs), constexprs)
        return triton.compile(source, target=GPUTarget("cuda", arch, 32))

    @pytest.mark.parametrize("element,arch", [("fp32", 90), ("bf16", 90), ("bf16", 80)])
    def test_attention_kernels_compile(element, arch):
        from judge_engine.layers.kernels.tiling import dot_precision, key_tile_size, query_tile_size

        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[element]
        tiles = dict(GROUP_SIZE=3, BLOCK_SIZE=16, BLOCK_N=key_tile_size(16, dtype), BLOCK_D=128,
                     DOT_PRECISION=dot_precision(dtype))
        decode = _compile("decode_attention", "_decode_attention_kernel", element,
                          dict(tiles, BLOCK_G=16, SPLIT=False), arch)
        decode_split = _compile("decode_attention", "_decode_attention_kernel", element,
                                dict(tiles, BLOCK_G=16, SPLIT=True), arch)
        merge = _compile("decode_attention", "_merge_partitions_kernel", element, dict(BLOCK_P=8, BLOCK_D=128), arch)
        prefill = _compile("prefill_attention", "_prefill_attention_kernel", element,
                           dict(tiles, BLOCK_M=query_tile_size(1000, dtype)), arch)
        for compiled in (decode, decode_split, merge, prefill):
            assert compiled.asm["cubin"]
            assert compiled.metadata.shared <= 100 * 1024, "tiles outgrow the shared memory of sm_86/sm_89"
        if element == "bf16":
            mma = "wgmma.mma_async" if arch == 90 else "mma.sync"
            assert mma in prefill.asm["ptx"], "prefill must run its matmuls on tensor cores"

    def test_store_kv_compiles():
        compiled = _compile("store_kv", "_store_kv_kernel", "bf16", dict(BLOCK_SIZE=16, BLOCK_H=4, BLOCK_D=64), 90)
        assert compiled.asm["cubin"]
