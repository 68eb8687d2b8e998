"""A float model from a .gguf whose linear maps stay in the file's block formats (layers/block_weight.py).

What the float32 conversion computes, without the float32 copy: every linear map's weight is read from the GGUF's
blocks into codes, scales and offsets (loading/gguf_blocks.py) and rebuilt a column chunk at a time as it is
multiplied, the same chunks in the same products as the float32 weight's, so every logit is the float32 model's to
the bit (tests/judge_engine/test_gguf_resident.py); the embeddings are looked up in the GGUF's own rows, the norms
and biases read as they are. Nothing is written to disk beyond the metadata and tokenizer of the conversion, and
the resident weights take about the GGUF file's size (the 1.5B default judge: 1.4 GB against 6.2 GB of float32).

It is how a CPU engine runs a .gguf unless ``JUDGE_ENGINE_GGUF_WEIGHTS=float32`` asks for the float32 copy (the
earlier way, kept for comparison: benchmarks/engine_judge.py measures both).
"""

from __future__ import annotations

import logging
import os
import time

import torch
from torch import nn

from judge_engine.layers.block_weight import BlockWeight
from judge_engine.loading.linear_sites import (EMBEDDINGS, keep_merged_parts_apart, linear_sites, site_feeds,
                                               tensors_besides)
from judge_engine.loading.weight_source import GGUFSource

log = logging.getLogger(__name__)

WEIGHTS_ENV = "JUDGE_ENGINE_GGUF_WEIGHTS"
CHOICES = ("blocks", "float32")


def gguf_weights_choice() -> str:
    """"blocks" (the default) or "float32", from JUDGE_ENGINE_GGUF_WEIGHTS."""
    choice = os.environ.get(WEIGHTS_ENV, "blocks").strip().lower() or "blocks"
    if choice not in CHOICES:
        raise ValueError(f"{WEIGHTS_ENV}={choice!r}: expected one of {', '.join(CHOICES)}")
    return choice


def load_gguf_resident(model: nn.Module, source: GGUFSource) -> None:
    """Fill ``model`` (on the CPU) from ``source`` with its linear maps as BlockWeights, structured as the
    float model runs them: a merged map fused where the float model fuses its parts, one product per part where it
    adopts them as they are."""
    started = time.perf_counter()
    sites = linear_sites(model)
    feeds = site_feeds(model, sites)
    # the float model's choice: a GGUF's tensors reach it as float32 CPU tensors
    fused = {id(site.owner): not site.owner.adopts_parts(torch.float32, torch.device("cpu"), torch.device("cpu"))
             for site in sites if site.attribute == "merged"}
    keep_merged_parts_apart(model)   # merged maps adopt the placeholders below instead of fusing them
    dtype = next(model.parameters()).dtype
    model.load_weights(tensors_besides(source, set(feeds) | {EMBEDDINGS}, dtype))
    parts: dict[str, dict[int, object]] = {}
    for name, feed in feeds.items():
        parts.setdefault(feed.site.name, {})[0 if feed.part is None else feed.part] = _rows_of(source, name)
    for site in sites:
        weights = [parts[site.name][index] for index in sorted(parts[site.name])]
        if site.attribute == "merged" and len(weights) > 1 and not fused[id(site.owner)]:
            site.owner.use_part_weights([BlockWeight([part]) for part in weights])
        else:
            site.install(model, BlockWeight(weights))
    del model.embed_tokens   # a placeholder until now
    model.embed_tokens = source.lookup_table(EMBEDDINGS)
    model.embed_tokens.dtype = dtype
    resident = sum(module.nbytes() for module in model.modules() if isinstance(module, BlockWeight))
    log.info("gguf: %d linear maps left in their blocks (%.2f GB resident) in %.1fs", len(sites), resident / 1e9,
             time.perf_counter() - started)


def _rows_of(source: GGUFSource, name: str):
    """A tensor's BlockRows, or its float32 values where its format has no block reader."""
    rows = source.block_rows(name)
    return rows if rows is not None else source.tensor_values(name)
