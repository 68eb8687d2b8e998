"""int8 products on this CPU: each exact route of judge_engine/layers/int8_linear.py against float32 products.

    python benchmarks/int8_products.py [--threads N] [--rounds R] [--rows 64,512,2048]

For the shapes of the default judge's linear maps (Qwen2.5-Coder-1.5B: Q/K/V 1536 -> 2048, o_proj 1536 -> 1536,
gate/up 1536 -> 17920, down 8960 -> 1536) at each row count (a decode step, a chunk, a full 2048-token step), times
every route this machine can run exactly and a float32 product of float operands (torch.mm: what a float32 engine
computes), in rounds that alternate them so the machine's drift touches all alike. Each route computes the
engine's grouped product (a scale per 32 terms of activations and of weights): the VNNI kernel or the AVX2 kernel
in one pass, or each group's integer sums through torch._int_mm or float32 products of the int8 values, then
scaled and added. Where _int_mm is exact, one plain _int_mm product ("int_mm per row": the integer sums for one
scale per row and per channel, int8's recipe until 2026-12-07) shows what the groups cost. Prints the CPU, the
route the engine's probe chose, GFLOP/s per shape (best of the rounds) and each route's total time over all shapes
against torch.mm's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

MAPS = {"qkv": (1536, 2048), "o_proj": (1536, 1536), "gate_up": (1536, 17920), "down": (8960, 1536)}


def product_arguments(doc: str) -> argparse.Namespace:
    """The product benchmarks' command line (--threads, --rounds, --rows), parsed; torch set to those threads."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", default="64,512,2048")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    return args


def main() -> None:
    args = product_arguments(__doc__)

    from judge_engine.layers import int8_linear
    from judge_engine.loading.cpu_info import host_cpu

    chosen = int8_linear.int8_products()
    routes, _ = int8_linear.exact_routes()
    print(f"cpu: {host_cpu().describe()}; {args.threads} threads; load average {os.getloadavg()[0]:.1f}")
    print(f"engine's choice: {chosen.method} ({chosen.reason})")
    generator = torch.Generator().manual_seed(0)
    shapes = [(rows, depth, cols, name) for rows in map(int, args.rows.split(",")) for name, (depth, cols)
              in MAPS.items()]
    best: dict[tuple[str, int], float] = {}
    for _ in range(args.rounds):
        for index, (rows, depth, cols, _name) in enumerate(shapes):
            a = torch.randint(-127, 128, (rows, depth), dtype=torch.int8, generator=generator)
            weight = torch.randint(-127, 128, (cols, depth), dtype=torch.int8, generator=generator)
            scales = torch.rand((rows, int8_linear.scale_columns(depth)), generator=generator)
            weight_scales = torch.rand((cols, int8_linear.scale_columns(depth)), generator=generator)
            a_float, weight_float = a.float(), weight.float()
            runs = {route: (lambda r=route: int8_linear.grouped_matmul(a, scales, weight, weight_scales, r))
                    for route in routes}
            if "int_mm" in routes:
                runs["int_mm per row"] = lambda: int8_linear.int8_matmul(a, weight.t(), "int_mm")
            runs["torch.mm float32"] = lambda: torch.mm(a_float, weight_float.t())
            for route, run in runs.items():
                run()
                started = time.perf_counter()
                run()
                elapsed = time.perf_counter() - started
                best[route, index] = min(best.get((route, index), float("inf")), elapsed)
    print_gflops_table("shape (rows x K x N)", [f"{rows} x {depth} x {cols} {name}" for rows, depth, cols, name in shapes],
                       [2 * rows * depth * cols for rows, depth, cols, _ in shapes], best, "torch.mm float32", "shapes")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def print_gflops_table(header: str, labels: list[str], flops: list[int], best: dict[tuple[str, int], float],
                       baseline: str, items: str) -> None:
    """GFLOP/s of each route (in the order ``best`` met them) on each product, best of the rounds; then each
    route's time over all products against ``baseline``'s."""
    routes = list(dict.fromkeys(route for route, _ in best))
    print(f"{header:<32}" + "".join(f"{route:>18}" for route in routes) + "   GFLOP/s, best of rounds")
    for index, (label, count) in enumerate(zip(labels, flops)):
        print(f"{label:<32}" + "".join(f"{count / best[route, index] / 1e9:>18.1f}" for route in routes))
    base = sum(best[baseline, index] for index in range(len(labels)))
    for route in routes:
        total = sum(best[route, index] for index in range(len(labels)))
        print(f"{route}: {total:.3f} s over all {items}, {base / total:.2f}x {baseline}")


if __name__ == "__main__":
    main()
