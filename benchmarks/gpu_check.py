"""GPU acceptance check, one command, under 5 minutes on one CUDA GPU:

1. each Triton kernel against the torch paged path on random batches (float32 within 2e-3, bfloat16 within
   3e-2; store_kv exactly), at the layouts of the embedded model and of a Llama-3-8B-sized model;
2. kernel timings against the torch path (decode and prefill), for information;
3. the engine on the embedded model with the kernels forced on, against the torch path: same logits;
4. the engine's judging and generation benchmarks (benchmarks/engine_judge.py, engine_generate.py) with
   --device cuda, each in a subprocess with what is left of the time budget.

    python benchmarks/gpu_check.py              # exit 0: all checks passed; 1: one failed
    python benchmarks/gpu_check.py --kernels-only
    python benchmarks/gpu_check.py --bench-args "--dtype bfloat16"

On a machine without CUDA it says so and exits 0. `TRITON_INTERPRET=1 python benchmarks/gpu_check.py
--device cpu --kernels-only` dry-runs the kernel checks on tiny sizes under the Triton interpreter.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = ("engine_judge.py", "engine_generate.py")
TOLERANCE = {"float32": 2e-3, "bfloat16": 3e-2}
# (name, block_size, num_kv_heads, group, head_dim)
LAYOUTS = [("smollm2-135m", 16, 3, 3, 64), ("llama3-8b", 16, 8, 4, 128), ("block32-mha", 32, 2, 1, 128)]


@dataclass
class Outcome:
    name: str
    ok: bool
    detail: str


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    import torch

    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device here (torch {torch.__version__}, CUDA build: {torch.version.cuda}); "
              "nothing to check. Run it on a machine with an NVIDIA GPU.")
        return 0
    if args.device == "cpu" and not interpret:
        print("gpu_check: --device cpu runs only under the Triton interpreter (TRITON_INTERPRET=1)")
        return 2
    try:
        import triton
    except ImportError:
        print("gpu_check: triton is not installed (pip install triton); the kernels cannot run")
        return 1

    deadline = time.monotonic() + args.budget
    device = torch.device(args.device)
    tiny = args.device == "cpu"
    _print_header(torch, triton, device)
    outcomes = _check_kernels(device, tiny)
    if not tiny:
        _time_kernels(device)
    if not args.kernels_only:
        outcomes.append(_check_engine_logits(args.device))
        outcomes += _run_benchmarks(args.device, deadline, shlex.split(args.bench_args))
    return _summarise(outcomes)


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--kernels-only", action="store_true", help="skip the engine checks and benchmarks")
    parser.add_argument("--budget", type=float, default=290.0, help="seconds for the whole check")
    parser.add_argument("--bench-args", default="", help='more options for both benchmarks, e.g. "--dtype bfloat16"')
    return parser.parse_args(argv)


def _print_header(torch, triton, device) -> None:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    print(f"gpu_check on {name}: torch {torch.__version__}, triton {triton.__version__}", flush=True)


# ---------------------------------------------------------------------------------------------------
# Kernels against the torch path


def _make_batch(query_lens, context_lens, block_size, num_kv_heads, group, head_dim, dtype, device, seed):
    """Random paged batch: shuffled blocks, prefixes already cached, new tokens' K/V not yet stored."""
    import torch

    from judge_engine.layers.attention.metadata import AttentionMetadata

    gen = torch.Generator().manual_seed(seed)
    blocks = [-(-n // block_size) for n in context_lens]
    num_blocks = sum(blocks) + 2
    order = torch.randperm(num_blocks, generator=gen)
    tables = torch.full((len(blocks), max(blocks)), -1, dtype=torch.int32)
    used = 0
    for b, count in enumerate(blocks):
        tables[b, :count] = order[used:used + count].int()
        used += count
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    v_cache = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    slots = []
    for b, (q_len, n) in enumerate(zip(query_lens, context_lens)):
        positions = torch.arange(n - q_len, n)
        slots.append(tables[b, positions // block_size].long() * block_size + positions % block_size)
    num_tokens = sum(query_lens)
    meta = AttentionMetadata(
        slot_mapping=torch.cat(slots).to(device),
        cu_seqlens_q=torch.tensor([0, *torch.tensor(query_lens).cumsum(0).tolist()], dtype=torch.int32).to(device),
        context_lens=torch.tensor(context_lens, dtype=torch.int32).to(device),
        block_tables=tables.to(device),
        max_seqlen_q=max(query_lens),
        max_context_len=max(context_lens),
        is_decode=all(n == 1 for n in query_lens),
    )
    q = torch.randn(num_tokens, num_kv_heads * group, head_dim, generator=gen).to(device=device, dtype=dtype)
    k = torch.randn(num_tokens, num_kv_heads, head_dim, generator=gen).to(device=device, dtype=dtype)
    v = torch.randn(num_tokens, num_kv_heads, head_dim, generator=gen).to(device=device, dtype=dtype)
    return q, k, v, k_cache, v_cache, meta


def _batch_shapes(tiny: bool) -> dict[str, tuple[list[int], list[int]]]:
    """kind -> (query_lens, context_lens): ragged, prefix hits, mid-block ends; few long sequences make
    the decode kernel split its keys into partitions on a GPU."""
    if tiny:
        return {"prefill": ([1, 21, 40], [1, 50, 40]), "decode": ([1] * 4, [1, 16, 33, 70])}
    rng = random.Random(0)
    query_lens = [1, 37, 200, 513, 64, 1000]
    prefixes = [0, 64, 0, 300, 1500, 17]
    decode = [1, 16, 17] + [rng.randint(1, 4000) for _ in range(61)]
    return {"prefill": (query_lens, [q + p for q, p in zip(query_lens, prefixes)]),
            "decode": ([1] * len(decode), decode),
            "decode-long": ([1] * 4, [1, 700, 3001, 5000])}


def _check_kernels(device, tiny: bool) -> list[Outcome]:
    import torch

    outcomes = []
    for dtype_name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        if tiny and dtype is torch.bfloat16:
            continue  # the interpreter's bfloat16 is numpy emulation: not what this check is about
        for layout in LAYOUTS:
            for kind, (query_lens, context_lens) in _batch_shapes(tiny).items():
                batch = _make_batch(query_lens, context_lens, *layout[1:], dtype, device, seed=len(outcomes))
                outcome = _check_batch(batch, f"kernel {kind} {dtype_name} {layout[0]}", TOLERANCE[dtype_name])
                print(f"  {'ok  ' if outcome.ok else 'FAIL'} {outcome.name}: {outcome.detail}", flush=True)
                outcomes.append(outcome)
    return outcomes


def _check_batch(batch, name: str, tolerance: float) -> Outcome:
    import torch

    from judge_engine.layers import kernels
    from judge_engine.layers.attention import torch_paged

    q, k, v, k_cache, v_cache, meta = batch
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    torch_paged.store_kv(k, v, ref_k, ref_v, meta.slot_mapping)
    kernels.store_kv(k, v, k_cache, v_cache, meta.slot_mapping)
    stored = torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v)
    scale = 1 / math.sqrt(q.shape[2])
    out = kernels.paged_attention(q, k_cache, v_cache, meta, scale)
    expected = torch_paged.paged_attention(q, k_cache, v_cache, meta, scale)
    error = (out.float() - expected.float()).abs().max().item()
    detail = f"max abs error {error:.2e} (limit {tolerance:.0e}), store_kv exact: {stored}"
    return Outcome(name, stored and error <= tolerance, detail)


def _time_kernels(device) -> None:
    """Decode and prefill at a Llama-3-8B layout in bfloat16: kernels against the torch path."""
    import torch

    from judge_engine.layers import kernels
    from judge_engine.layers.attention import torch_paged

    print("timings (bfloat16, 32 query heads / 8 kv heads, head_dim 128, block 16):", flush=True)
    cases = [("decode 64 seqs x 2048 ctx", [1] * 64, [2048] * 64),
             ("decode 8 seqs x 8192 ctx", [1] * 8, [8192] * 8),
             ("prefill 8 x 512 new on 512 cached", [512] * 8, [1024] * 8)]
    for label, q_lens, ctx in cases:
        q, k, v, k_cache, v_cache, meta = _make_batch(q_lens, ctx, 16, 8, 4, 128, torch.bfloat16, device, seed=7)
        kernels.store_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        kernel_ms = _time(lambda: kernels.paged_attention(q, k_cache, v_cache, meta, 128 ** -0.5))
        torch_ms = _time(lambda: torch_paged.paged_attention(q, k_cache, v_cache, meta, 128 ** -0.5))
        kv_bytes = sum(ctx) * 8 * 128 * 2 * 2
        print(f"  {label}: triton {kernel_ms:.3f} ms ({kv_bytes / kernel_ms / 1e6:.0f} GB/s of K/V), "
              f"torch {torch_ms:.3f} ms, speed-up x{torch_ms / kernel_ms:.1f}", flush=True)
    k, v = k[:4096], v[:4096]
    slots = meta.slot_mapping[:4096]
    store_ms = _time(lambda: kernels.store_kv(k, v, k_cache, v_cache, slots))
    torch_store_ms = _time(lambda: torch_paged.store_kv(k, v, k_cache, v_cache, slots))
    print(f"  store_kv 4096 tokens: triton {store_ms:.3f} ms, torch {torch_store_ms:.3f} ms", flush=True)


def _time(fn, repeats: int = 20) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


# ---------------------------------------------------------------------------------------------------
# Engine


def _check_engine_logits(device: str) -> Outcome:
    """The embedded model, greedy, kernels forced on against the torch path: same tokens, logits within 2e-3."""
    import torch

    from judge_engine import LLM, SamplingParams

    prompts = ["You are a strict grader. Does the answer state the total? Answer: 17 dollars.",
               "Hi", "The capital of France is", "List three primes:"]
    params = SamplingParams(temperature=0.0, max_tokens=16, return_logits=True)
    start = time.monotonic()
    runs = {}
    for backend in ("torch", "triton"):
        llm = LLM(model=None, device=device, dtype="float32", attention_backend=backend)
        runs[backend] = llm.generate(prompts, params) + llm.generate(prompts[:1], params)  # 2nd: prefix hit
        del llm
        if device == "cuda":
            torch.cuda.empty_cache()
    error = max((a.logits - b.logits).abs().max().item() for a, b in zip(runs["triton"], runs["torch"]))
    same = all(a.token_ids == b.token_ids for a, b in zip(runs["triton"], runs["torch"]))
    ok = same and error <= TOLERANCE["float32"]
    detail = f"max abs logit error {error:.2e}, same tokens: {same} ({time.monotonic() - start:.0f} s)"
    print(f"  {'ok  ' if ok else 'FAIL'} engine triton vs torch: {detail}", flush=True)
    return Outcome("engine logits, triton vs torch", ok, detail)


def _run_benchmarks(device: str, deadline: float, extra_args: list[str]) -> list[Outcome]:
    outcomes = []
    for position, script in enumerate(BENCHMARKS):
        path = REPO / "benchmarks" / script
        if not path.exists():
            outcomes.append(Outcome(script, False, "missing"))
            print(f"  FAIL {script}: missing", flush=True)
            continue
        # Split what is left between the benchmarks still to run.
        timeout = (deadline - time.monotonic()) / (len(BENCHMARKS) - position)
        if timeout < 10:
            outcomes.append(Outcome(script, False, "no time left in the budget"))
            continue
        command = [sys.executable, str(path), "--device", device, *extra_args]
        print(f"--- {' '.join(command[1:])} (timeout {timeout:.0f} s)", flush=True)
        try:
            done = subprocess.run(command, cwd=REPO, timeout=timeout)
            outcomes.append(Outcome(script, done.returncode == 0, f"exit code {done.returncode}"))
        except subprocess.TimeoutExpired:
            outcomes.append(Outcome(script, False, f"timed out after {timeout:.0f} s"))
    return outcomes


def _summarise(outcomes: list[Outcome]) -> int:
    failed = [o for o in outcomes if not o.ok]
    print(f"gpu_check: {len(outcomes) - len(failed)}/{len(outcomes)} checks passed")
    for outcome in failed:
        print(f"  FAILED {outcome.name}: {outcome.detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
