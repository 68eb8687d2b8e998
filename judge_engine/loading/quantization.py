"""int8 linear maps: EngineConfig.quantization="int8" (W8A8 products whose integer sums make batch invariance free)
or "int8-weights" (the same int8 weights, multiplied by float activations: W8A32, layers/int8_linear.py's
DequantizedInt8Weight; the memory of int8 at about float32's accuracy and speed).

The recipe (RECIPE names the weights' part, which the disk cache holds and is keyed by, so a changed recipe rebuilds):

- weights: symmetric, one scale per group of 32 consecutive terms of an output channel (GROUP in
  layers/int8_linear.py; the last group may be shorter): ``w[n, g] = max |W[n, k]| / 127`` over the group,
  ``Wq = round(W / w[n, g])`` in [-127, 127], held int8 in memory (a quarter of float32, plus a float32 scale per 32
  values); the LM head: one scale per output channel (its activations stay float, below);
- activations: dynamic, symmetric, one scale per group of 32 consecutive values of a row, the weights' groups:
  ``a[m, g] = max |x[m, k]| / 127`` over the group, ``xq = round(x / a[m, g])`` in [-127, 127];
- ``y[m, n] = sum_g ((sum_{k in g} xq[m, k] * Wq[n, k]) * a[m, g]) * w[n, g] (+ bias[n])``, each group's sum in
  integers, the groups added in order.

Every step of that is either elementwise, a max over part of one row (exact in any order), or an integer sum (exact
in any order), so a row's output depends on that row alone: no row tiles, no padding, whatever the batch. Attention,
norms, the residual stream and the products' dequantised outputs stay float32. Until 2026-12-07 activations had one
scale per row and weights one per channel; scales per group halved int8's distance from float32 twice over
(docs/engine-design.md, int8 products).

The integer products and their exactness on every x86-64 CPU: judge_engine/layers/int8_linear.py.

The quantized weights are cached on disk under the engine cache's ``quantized/`` folder, next to ``converted/``
(one safetensors file per model source and recipe), so a model is quantized once; later start-ups map the file.
They are built from the checkpoint's tensors one at a time (a GGUF's dequantized tensor by tensor), so building
them needs the memory of the largest tensor, never a float32 copy of the model, in memory or on disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

from judge_engine.layers.int8_linear import GROUP, DequantizedInt8Weight, Int8Weight, quantize_weight, scale_columns
from judge_engine.loading.cache import cache_lock, engine_cache_dir, staged_file
from judge_engine.loading.child_env import child_env
from judge_engine.loading.linear_sites import (EMBEDDINGS, LinearSite, SiteFeed, keep_merged_parts_apart, linear_sites,
                                               site_feeds, tensors_besides)
from judge_engine.loading.weight_source import WeightSource

log = logging.getLogger(__name__)

QUANTIZATIONS = ("int8", "int8-weights")
# The LM head: its weight int8, its activations float (DequantizedInt8Weight). Measured three ways (docs/benchmarks.md):
# a float head keeps a tied model's float embeddings resident (0.9 GB for a 1.5B model); a W8A8 head added half
# the int8 accuracy cost (max |log-prob - float32| 0.93 against 0.68 on benchmarks/engine_judge.py's prompts);
# the weight alone costs little of either.
RECIPE = "w8-sym-group32-v3-head-perchannel"   # v2: one scale per channel; v1 named the activations' recipe too
# A cache of more int8 weight bytes than this is built in a child interpreter: building one in the process that then
# judges left it holding 0.7 GB more memory than a start from the cache (the 1.5B: first run's peak 2.7-2.9 GiB
# against 2.3; docs/benchmarks.md), and a child's memory is returned whole when it exits. Small models (the 135M's
# 0.13 GB) are built in-process, where the interpreter's start would cost more than the build.
CHILD_BUILD_BYTES = 256 * 2**20


def load_quantized(model: nn.Module, source: WeightSource, cache_dir: str | Path | None = None,
                   quantization: str = "int8") -> str:
    """Fill ``model`` from ``source`` with every supported linear map int8: the int8 weights read from the disk
    cache, or quantized into it now from the source's tensors one at a time; the other tensors (norms, biases) read
    as they are; the embeddings looked up row by row in the source (a GGUF's own blocks). No float copy of a
    quantized weight is ever held whole. ``quantization``: "int8" (W8A8 maps) or "int8-weights" (W8A32 maps; the
    same int8 weights and cache file). Returns "cache" or "built"."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization: expected one of {QUANTIZATIONS}, got {quantization!r}")
    keep_merged_parts_apart(model)
    sites = linear_sites(model)
    feeds = site_feeds(model, sites)
    path = quantized_cache_path(source, cache_dir, model)
    cached, origin = _read_cache(path, sites, model), "cache"
    if cached is None:
        with cache_lock(path.parent):
            cached = _read_cache(path, sites, model)  # another process may have written it meanwhile
            if cached is None:
                # the user sees why the first start takes longer (about 20 s for a 1.5B model on 2 cores)
                print(f"judge_engine: quantizing the {len(sites)} linear maps of {Path(source.folder).name} to int8 "
                      "(once)...", file=sys.stderr, flush=True)
                started = time.perf_counter()
                if _int8_bytes(sites, model) > CHILD_BUILD_BYTES and sys.executable:
                    _build_in_child(path, source, cache_dir)
                else:
                    _build_cache(path, source, sites, feeds, model)
                cached, origin = _read_cache(path, sites, model), "built"
                print(f"judge_engine: quantized in {time.perf_counter() - started:.1f}s -> {path}", file=sys.stderr,
                      flush=True)
    if cached is None:
        raise RuntimeError(f"int8: the cache {path} written now cannot be read back")
    model.load_weights(tensors_besides(source, set(feeds) | {EMBEDDINGS}))
    kind = Int8Weight if quantization == "int8" else DequantizedInt8Weight
    for site in sites:
        # the LM head's activations stay float either way (RECIPE)
        site.install(model, (DequantizedInt8Weight if site.attribute == "logits_head" else kind)(*cached[site.name]))
    del model.embed_tokens   # a placeholder until now
    model.embed_tokens = source.lookup_table(EMBEDDINGS)
    # W8A8: no product needs the flat batch padded to row tiles any more (the float LM head pads its own few rows);
    # W8A32 products are row-tiled float products, as a float model's
    model.pads_row_tiles = quantization != "int8"
    return origin


def _build_cache(path: Path, source: WeightSource, sites: list[LinearSite], feeds: dict[str, SiteFeed],
                 model: nn.Module) -> None:
    """Quantize the source's tensors one at a time into the cache file: a merged map's parts wait for each other
    (a layer's few), every finished map is written at its place in the file and dropped. The file is staged beside
    its name and renamed into place once whole, so a half-written file is never read."""
    layout = {site.name: _shapes(site, model) for site in sites}
    waiting: dict[str, dict[int, tuple[torch.Tensor, torch.Tensor]]] = {}
    metadata = {"recipe": RECIPE, "source": json.dumps(source.fingerprint())}
    with staged_file(path, ".quantizing-") as staging, _CacheWriter(staging, layout, metadata) as writer:
        for tensor in source.tensors():
            feed = feeds.get(tensor.name)
            if feed is None:
                continue
            quantized = quantize_weight(tensor.load(), _weight_group(feed.site))
            if feed.part is None:
                writer.write(feed.site.name, *quantized)
                continue
            parts = waiting.setdefault(feed.site.name, {})
            parts[feed.part] = quantized
            if len(parts) == feed.site.parts():
                del waiting[feed.site.name]
                # scales per channel or per group of a channel: the parts' int8 rows and their scales,
                # concatenated, are the fused weight's quantization
                ordered = [parts[index] for index in range(len(parts))]
                writer.write(feed.site.name, torch.cat([q for q, _ in ordered]), torch.cat([s for _, s in ordered]))


def _int8_bytes(sites: list[LinearSite], model: nn.Module) -> int:
    return sum(rows * depth for rows, depth in (site.shape(model) for site in sites))


def _build_in_child(path: Path, source: WeightSource, cache_dir: str | Path | None) -> None:
    """_build_cache in a new interpreter (build_in_this_process), which rebuilds the source and the model's skeleton
    from the source's path and writes ``path``, with this process's torch threads; this process holds the cache lock
    meanwhile. Its error, if any, is raised here with the child's last lines."""
    code = ("import sys, torch; from pathlib import Path; "
            "from judge_engine.loading.quantization import build_in_this_process; "
            "torch.set_num_threads(int(sys.argv[4])); "
            "build_in_this_process(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))")
    command = [sys.executable, "-c", code, str(source.origin), str(engine_cache_dir(cache_dir)), str(path),
               str(torch.get_num_threads())]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, errors="replace", env=child_env())
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"int8: quantizing {source.origin} in a child process failed (exit {done.returncode}):\n"
                           f"{tail}")
    if done.stderr:
        sys.stderr.write(done.stderr)


def build_in_this_process(origin: Path, cache_dir: Path, path: Path) -> None:
    """The child's side of _build_in_child: the source at ``origin`` (a .gguf or an HF folder) quantized into
    ``path``, which must be the cache path this source and model have (the parent's, under the same recipe)."""
    from judge_engine.loading.skeleton import model_skeleton
    from judge_engine.loading.weight_source import weight_source

    source = weight_source(origin, cache_dir, float_weights=False)
    model, _ = model_skeleton(source.folder)
    keep_merged_parts_apart(model)
    sites = linear_sites(model)
    expected = quantized_cache_path(source, cache_dir, model)
    if expected != path:
        raise ValueError(f"int8: asked to build {path}, but {origin} under recipe {RECIPE} caches to {expected}")
    with torch.no_grad():
        _build_cache(path, source, sites, site_feeds(model, sites), model)


def _weight_group(site: LinearSite) -> int | None:
    """Terms per weight scale: GROUP, or None (one scale per output channel) for the LM head (RECIPE)."""
    return None if site.attribute == "logits_head" else GROUP


def _shapes(site: LinearSite, model: nn.Module) -> tuple[tuple[int, int], tuple[int, int]]:
    """A map's int8 weight's shape and its scales'."""
    rows, depth = site.shape(model)
    return (rows, depth), (rows, scale_columns(depth, _weight_group(site)))


class _CacheWriter:
    """A safetensors file whose header (every map's int8 weight and float32 scales) is written first and whose
    tensors are written at their offsets as they are ready, in any order; leaving the block with a map unwritten
    raises (inside cache.staged_file, so the file is never renamed into place)."""

    def __init__(self, path: Path, layout: dict[str, tuple[tuple[int, int], tuple[int, int]]],
                 metadata: dict[str, str]):
        from judge_engine.loading.checkpoint import TensorSlot, safetensors_header

        slots = []
        for name, ((rows, columns), (scale_rows, scale_columns)) in layout.items():
            slots += [TensorSlot(f"{name}.qweight", "I8", [rows, columns], rows * columns),
                      TensorSlot(f"{name}.scale", "F32", [scale_rows, scale_columns], 4 * scale_rows * scale_columns)]
        self.header, self.offsets = safetensors_header(slots, metadata)   # offsets: a tensor's start in the data
        self.size = sum(slot.size for slot in slots)
        self.path, self.shapes, self.pending = path, dict(layout), set(layout)

    def __enter__(self) -> "_CacheWriter":
        self.file = open(self.path, "wb")
        self.file.write(self.header)
        self.file.truncate(len(self.header) + self.size)
        return self

    def write(self, name: str, q: torch.Tensor, scale: torch.Tensor) -> None:
        if (tuple(q.shape), tuple(scale.shape)) != self.shapes[name] or q.dtype != torch.int8:
            raise ValueError(f"int8: {name} quantized to {tuple(q.shape)} {q.dtype} with scales "
                             f"{tuple(scale.shape)}, expected {self.shapes[name]}")
        for key, tensor in ((f"{name}.qweight", q), (f"{name}.scale", scale.to(torch.float32))):
            self.file.seek(len(self.header) + self.offsets[key])
            self.file.write(tensor.contiguous().numpy().tobytes())
        self.pending.discard(name)

    def __exit__(self, kind, error, traceback) -> None:
        self.file.close()
        if kind is None and self.pending:
            raise ValueError(f"int8: the checkpoint has no weights for {sorted(self.pending)[:4]}")


def quantized_cache_path(source: WeightSource, cache_dir: str | Path | None, model: nn.Module) -> Path:
    """The cache file of this source's weights under this recipe: keyed by the recipe, the source's fingerprint (a
    GGUF's sha256; a folder and its weight files' sizes and modification times) and the model's class."""
    identity = {"recipe": RECIPE, "source": source.fingerprint(), "model": type(model).__qualname__}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return engine_cache_dir(cache_dir) / "quantized" / f"{Path(source.folder).name[:40]}-{key}.safetensors"


def _read_cache(path: Path, sites: list[LinearSite], model: nn.Module) -> dict | None:
    if not path.is_file():
        return None
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            if (handle.metadata() or {}).get("recipe") != RECIPE:
                return None
            names = set(handle.keys())
            loaded = {}
            for site in sites:
                if f"{site.name}.qweight" not in names or f"{site.name}.scale" not in names:
                    return None
                q, scale = handle.get_tensor(f"{site.name}.qweight"), handle.get_tensor(f"{site.name}.scale")
                if (tuple(q.shape), tuple(scale.shape)) != _shapes(site, model) or q.dtype != torch.int8:
                    return None
                loaded[site.name] = (q, scale)
            return loaded
    except (OSError, RuntimeError, ValueError, SafetensorError) as exc:  # a damaged file is rebuilt
        log.warning("int8: ignoring unreadable cache %s: %s", path, exc)
        return None
