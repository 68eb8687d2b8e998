"""The CPU path's attention calls on this CPU: the engine's own kernel (judge_engine/layers/attention/
row_attention.py) against torch's flash attention, measured in the same rounds.

    python benchmarks/cpu_attention.py [--threads N] [--rounds R]

The calls are the shapes a judging step makes (judge_engine/layers/attention/torch_paged.py): a segment's queries
over its own 128 keys (masked) and over the ~650 shared keys before it, for the 135M (9 query heads on 3 KV heads
of 64) and the default judge (Qwen2.5-Coder-1.5B: 12 on 2 of 128), in the layouts the engine hands over (keys read
from the cache's [keys, KV heads, dim] rows, broadcast over the call's batch), and a decode step's (one query per
sequence). Alternating rounds, so the machine's drift touches both alike. Prints the CPU, GFLOP/s per shape (best of
the rounds), the kernel's total time against flash's, and the largest difference between the two outputs (the
kernel's exps are its own: the bits differ, the values agree to float32 rounding).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

# name: (batch, KV heads, query rows per KV head, keys, head dim, masked)
SHAPES = {
    "135m own segment": (6, 3, 3 * 128, 128, 64, True),
    "135m before": (1, 3, 160, 640, 64, False),
    "135m decode": (32, 3, 32, 700, 64, False),
    "1.5b own segment": (6, 2, 6 * 128, 128, 128, True),
    "1.5b before": (1, 2, 160, 640, 128, False),
    "1.5b decode": (32, 2, 32, 700, 128, False),
}


def call(shape, generator):
    batch, heads, rows, keys, dim, masked = shape
    q = torch.randn(batch, heads, rows, dim, generator=generator)
    cache_k = torch.randn(1, keys, heads, dim, generator=generator)
    cache_v = torch.randn(1, keys, heads, dim, generator=generator)
    k = cache_k.permute(0, 2, 1, 3).expand(batch, -1, -1, -1)
    v = cache_v.permute(0, 2, 1, 3).expand(batch, -1, -1, -1)
    mask = None
    if masked:
        positions = torch.arange(rows) % keys
        mask = torch.zeros(1, 1, rows, keys).masked_fill_(torch.arange(keys)[None, :] > positions[:, None],
                                                          float("-inf")).expand(batch, -1, -1, -1)
    return q, k, v, mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from judge_engine.layers.attention import row_attention, torch_paged
    from judge_engine.loading.cpu_info import host_cpu

    print(f"cpu: {host_cpu().describe()}; {args.threads} threads; load average {os.getloadavg()[0]:.1f}")
    if row_attention.kernel().function is None:
        raise SystemExit(f"the attention kernel is unavailable here: {row_attention.kernel().reason}")
    routes = {"kernel": row_attention.attend, "flash": lambda q, k, v, scale, mask: torch_paged._flash(q, k, v, scale, mask)}
    generator = torch.Generator().manual_seed(0)
    totals = {name: 0.0 for name in routes}
    print(f"{'call':18} {'kernel GFLOP/s':>15} {'flash GFLOP/s':>14} {'max |kernel - flash|':>21}")
    for name, shape in SHAPES.items():
        q, k, v, mask = call(shape, generator)
        scale = shape[4] ** -0.5
        flops = 4 * q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2] * q.shape[3]
        best = {route: float("inf") for route in routes}
        outputs = {}
        for _ in range(args.rounds):
            for route, attend in routes.items():
                start = time.perf_counter()
                outputs[route] = attend(q, k, v, scale, mask)
                seconds = time.perf_counter() - start
                best[route] = min(best[route], seconds)
                totals[route] += seconds
        difference = (outputs["kernel"][0] - outputs["flash"][0]).abs().max().item()
        print(f"{name:18} {flops / best['kernel'] / 1e9:15.1f} {flops / best['flash'] / 1e9:14.1f} {difference:21.2e}")
    print(f"all calls, all rounds: kernel {totals['kernel']:.2f} s, flash {totals['flash']:.2f} s "
          f"(kernel / flash {totals['kernel'] / totals['flash']:.2f}x the time)")


if __name__ == "__main__":
    main()
