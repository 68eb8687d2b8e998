"""int8 weights times float activations (W8A32) on this CPU: the LM head of quantization="int8" and every map of
"int8-weights", read as a block weight of int8 codes, against float copies of the weight's rows.

    python benchmarks/w8a32_products.py [--threads N] [--rounds R] [--rows 1,36,512]

judge_engine/layers/int8_linear.py's DequantizedInt8Weight multiplies float rows by ``float(code) * scale``. Its
route: the codes as one block weight (layers/block_weight.py), which the float32 kernel rebuilds a panel at a time in
cache, as it reads a GGUF's blocks. The baseline, measured in the same rounds (alternating, so the machine's drift
touches both alike): the route before 2026-12-07, float copies of DEQUANTIZED_ROWS weight rows at a time (the one
a depth that is not a whole number of groups still takes), then the same float products. Shapes: the default
judge's LM head (Qwen2.5-Coder-1.5B: 1536 -> 151,936, one scale per channel) and its maps with a scale per group of
32 (int8-weights); rows: a decode step, a judging step's kept rows, a chunk. Prints the CPU, GFLOP/s per shape
(best of the rounds), each route's total time against the baseline's, and whether the two gave the same bits.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

import torch  # noqa: E402
from int8_products import MAPS, print_gflops_table, product_arguments  # noqa: E402

SHAPES = {"lm_head": (1536, 151936, None), **{name: (depth, cols, 32) for name, (depth, cols) in MAPS.items()}}


def main() -> None:
    args = product_arguments(__doc__)

    from judge_engine.layers import int8_linear
    from judge_engine.loading.cpu_info import host_cpu

    print(f"cpu: {host_cpu().describe()}; {args.threads} threads; load average {os.getloadavg()[0]:.1f}")
    generator = torch.Generator().manual_seed(0)
    weights = {}
    for name, (depth, cols, group) in SHAPES.items():
        qweight = torch.randint(-127, 128, (cols, depth), dtype=torch.int8, generator=generator)
        scale = torch.rand((cols, int8_linear.scale_columns(depth, group)), generator=generator) / 1000
        weights[name] = int8_linear.DequantizedInt8Weight(qweight, scale)
    shapes = [(rows, name) for rows in map(int, args.rows.split(",")) for name in SHAPES]
    best: dict[tuple[str, int], float] = {}
    same_bits = True
    for _ in range(args.rounds):
        for index, (rows, name) in enumerate(shapes):
            weight = weights[name]
            x = torch.randn(rows, weight.shape[1], generator=generator)
            per_channel = weight.scale.shape[1] == 1
            runs = {"block weight": lambda: weight(x),
                    "float copies": lambda: copies_route(weight, x, per_channel)}
            outputs = {}
            for route, run in runs.items():
                run()
                started = time.perf_counter()
                outputs[route] = run()
                best[route, index] = min(best.get((route, index), float("inf")), time.perf_counter() - started)
            same_bits = same_bits and torch.equal(*outputs.values())
    print_gflops_table("shape (rows x K x N)", [f"{rows} x {SHAPES[name][0]} x {SHAPES[name][1]} {name}"
                                                for rows, name in shapes],
                       [2 * rows * SHAPES[name][0] * SHAPES[name][1] for rows, name in shapes], best, "float copies",
                       "shapes")
    print(f"same bits on every shape and round: {same_bits}; load average at the end {os.getloadavg()[0]:.1f}")


def copies_route(weight, x: torch.Tensor, per_channel: bool) -> torch.Tensor:
    out = weight._dequantized_chunks(x, per_channel)
    return out.mul_(weight.scale[:, 0]) if per_channel else out


if __name__ == "__main__":
    main()
