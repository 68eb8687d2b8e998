"""float32 products on this CPU: the engine's own kernel (judge_engine/layers/float_gemm.py) against row tiles
through torch (judge_engine/layers/row_tiles.py, the route before it), on float32 weights and on GGUF block weights.

    python benchmarks/float_products.py [--threads N] [--rounds R] [--rows 64,512,2048]

For the linear maps of the default judge's first layer (Qwen2.5-Coder-1.5B, Q4_K_M: Q/K/V in Q4_K and Q6_K, o_proj,
gate and up in Q4_K, down in Q6_K), read from its GGUF in the model cache (`rubric model pull
qwen2.5-coder-1.5b-instruct` fetches it), at each row count (a decode step, a chunk, a full 2048-token step),
times both routes on the weight kept in its blocks (what a float engine on the CPU holds) and on its float32 values,
in rounds that alternate them so the machine's drift touches all alike. Prints the CPU, GFLOP/s per map (best of
the rounds), each route's total time over all maps against the torch route on blocks, and how far the two routes'
outputs are apart.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

import torch  # noqa: E402
from int8_products import print_gflops_table, product_arguments  # noqa: E402

MODEL = "qwen2.5-coder-1.5b-instruct"
MAPS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o_proj": "attn_output", "gate": "ffn_gate", "up": "ffn_up",
        "down": "ffn_down"}


def first_layer_maps() -> dict[str, object]:
    """The first layer's linear maps as BlockWeights, read from the default judge's GGUF."""
    import gguf

    from judge_engine.layers.block_weight import BlockWeight
    from judge_engine.loading.catalog import find_model
    from judge_engine.loading.catalog.pull import pulled_model
    from judge_engine.loading.gguf_blocks import read_block_rows

    path = str(pulled_model(find_model(MODEL)))
    reader = gguf.GGUFReader(path)
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    maps = {}
    for name, gguf_name in MAPS.items():
        tensor = tensors[f"blk.0.{gguf_name}.weight"]
        columns, rows = (int(n) for n in tensor.shape)
        maps[f"{name} ({tensor.tensor_type.name})"] = BlockWeight(
            [read_block_rows(path, tensor.data_offset, tensor.tensor_type.name, rows, columns)])
    return maps


def main() -> None:
    args = product_arguments(__doc__)

    from judge_engine.layers import float_gemm, row_tiles
    from judge_engine.loading.cpu_info import host_cpu

    print(f"cpu: {host_cpu().describe()}; {args.threads} threads; load average {os.getloadavg()[0]:.1f}")
    if float_gemm.kernel().function is None:
        raise SystemExit(f"the float32 kernel is unavailable here: {float_gemm.kernel().reason}")
    maps = first_layer_maps()
    dense = {name: weight.rows(0, weight.shape[0]) for name, weight in maps.items()}
    generator = torch.Generator().manual_seed(0)
    shapes = [(rows, name) for rows in map(int, args.rows.split(",")) for name in maps]
    routes = {"kernel, blocks": lambda x, name: row_tiles.linear(x, maps[name]),
              "kernel, float32": lambda x, name: row_tiles.linear(x, dense[name]),
              "tiles, blocks": lambda x, name: row_tiles.tiled_linear(x, maps[name]),
              "tiles, float32": lambda x, name: row_tiles.tiled_linear(x, dense[name])}
    best: dict[tuple[str, int], float] = {}
    apart = 0.0
    for _ in range(args.rounds):
        for index, (rows, name) in enumerate(shapes):
            x = torch.randn(rows, maps[name].shape[1], generator=generator)
            outputs = {}
            for route, run in routes.items():
                run(x, name)
                started = time.perf_counter()
                outputs[route] = run(x, name)
                best[route, index] = min(best.get((route, index), float("inf")), time.perf_counter() - started)
            scale = outputs["tiles, float32"].abs().max().item()
            apart = max(apart, (outputs["kernel, blocks"] - outputs["tiles, float32"]).abs().max().item() / scale)
    labels = [f"{name} {rows} x {maps[name].shape[1]} x {maps[name].shape[0]}" for rows, name in shapes]
    flops = [2 * rows * maps[name].shape[0] * maps[name].shape[1] for rows, name in shapes]
    print_gflops_table("map (rows x K x N)", labels, flops, best, "tiles, blocks", "maps")
    print(f"max |kernel - tiles| / max |output|: {apart:.1e}; load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
