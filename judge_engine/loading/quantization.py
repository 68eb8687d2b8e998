"""int8 linear maps (EngineConfig.quantization="int8"): W8A8 products whose integer sums make batch invariance free.

The recipe (RECIPE; the disk cache is keyed by it, so a changed recipe rebuilds):

- weights: per output channel, symmetric: ``scale[n] = max_k |W[n, k]| / 127``, ``Wq = round(W / scale)`` in
  [-127, 127], held int8 in memory (a quarter of float32);
- activations: per token (row), dynamic, symmetric: ``inv = 127 / max_k |x[m, k]|``, ``xq = round(x * inv)`` in
  [-127, 127], ``a[m] = max_k |x[m, k]| / 127``;
- ``y[m, n] = (sum_k xq[m, k] * Wq[n, k]) * a[m] * scale[n] (+ bias[n])``, the sum in int32.

Every step of that is either elementwise, a max over one row (exact in any order), or an integer sum (exact in any
order), so a row's output depends on that row alone: no row tiles, no padding, whatever the batch. Attention,
norms, the residual stream and the products' dequantised outputs stay float32.

The integer products and their exactness on every x86-64 CPU: judge_engine/layers/int8_linear.py.

The quantized weights are cached on disk under the engine cache's ``quantized/`` folder, next to ``converted/``
(one safetensors file per model folder and recipe), so a model is quantized once; later start-ups map the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from judge_engine.layers.int8_linear import Int8HeadWeight, Int8Weight, quantize_weight

log = logging.getLogger(__name__)

QUANTIZATIONS = ("int8",)
# The LM head: its weight int8, its activations float (Int8HeadWeight). Measured three ways (docs/benchmarks.md):
# a float head keeps a tied model's float embeddings resident (0.9 GB for a 1.5B model); a W8A8 head added half
# the int8 accuracy cost (max |log-prob - float32| 0.93 against 0.68 on benchmarks/engine_judge.py's prompts);
# the weight alone costs little of either.
RECIPE = "w8a8-sym-perchannel-pertoken-v1-head-w8a32"


# -- the model's linear maps --------------------------------------------------------------------------------------
@dataclass
class _Site:
    name: str          # a stable name in the cache file
    owner: nn.Module
    attribute: str     # the owner's weight attribute; "merged" for a MergedLinear; "logits_head" for the LM head

    def float_weight(self, model: nn.Module) -> torch.Tensor:
        if self.attribute == "merged":
            return self.owner.merged_weight()
        if self.attribute == "logits_head":
            return model.embed_tokens if model.lm_head is None else model.lm_head
        return getattr(self.owner, self.attribute)

    def quantized(self, model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """(int8 weight, scales); a merged map kept as parts is quantized part by part and its int8 rows and scales
        concatenated: per-channel scales make that the quantization of the fused weight, without a float copy."""
        if self.attribute == "merged" and self.owner.part_weights is not None:
            parts = [quantize_weight(weight) for weight in self.owner.part_weights]
            return torch.cat([q for q, _ in parts]), torch.cat([scale for _, scale in parts])
        return quantize_weight(self.float_weight(model))

    def shape(self, model: nn.Module) -> tuple[int, int]:
        if self.attribute == "merged":
            return sum(self.owner.out_sizes), self.owner.in_features
        return tuple(self.float_weight(model).shape)

    def install(self, model: nn.Module, weight: Int8Weight) -> None:
        if self.attribute == "merged":
            self.owner.use_weight(weight)
            return
        if self.attribute == "logits_head":
            weight = Int8HeadWeight(weight.qweight, weight.scale)
            model.logits_head = weight
            if model.lm_head is not None:  # untied: the float head is no longer read
                del model.lm_head
                model.lm_head = weight
            return
        delattr(self.owner, self.attribute)  # drop the float Parameter; the Int8Weight takes its name
        setattr(self.owner, self.attribute, weight)


def _sites(model: nn.Module) -> list[_Site]:
    from judge_engine.models.llama import LlamaAttention, LlamaMLP
    from judge_engine.layers.merged_linear import MergedLinear

    sites = []
    for name, module in model.named_modules():
        if isinstance(module, MergedLinear):
            sites.append(_Site(name, module, "merged"))
        elif isinstance(module, LlamaAttention):
            sites.append(_Site(f"{name}.o_proj", module, "o_weight"))
        elif isinstance(module, LlamaMLP):
            sites.append(_Site(f"{name}.down_proj", module, "down_weight"))
    sites.append(_Site("lm_head", model, "logits_head"))
    return sites


def prepare_for_quantization(model: nn.Module) -> None:
    """Before the checkpoint is loaded: merged maps keep the checkpoint's parts as they are, without a float copy to
    fuse them (quantize_model fuses their int8 rows)."""
    from judge_engine.layers.merged_linear import MergedLinear

    for module in model.modules():
        if isinstance(module, MergedLinear):
            module.always_fuse = False


def quantize_model(model: nn.Module, folder: Path, cache_dir: str | Path | None = None) -> str:
    """Replace every supported linear map's weight by its int8 form, read from the disk cache or quantized (and
    cached) now. Returns "cache" or "built"."""
    sites = _sites(model)
    path = quantized_cache_path(folder, cache_dir, model)
    cached = _read_cache(path, sites, model)
    source = "cache"
    if cached is None:
        from judge_engine.loading.cache import cache_lock

        with cache_lock(path.parent):
            cached = _read_cache(path, sites, model)  # another process may have written it meanwhile
            if cached is None:
                started = time.perf_counter()
                cached = {}
                for site in sites:
                    cached[site.name] = site.quantized(model)
                _write_cache(path, cached, folder)
                source = "built"
                log.info("int8: quantized %d linear maps in %.1fs -> %s", len(sites), time.perf_counter() - started,
                         path)
    for site in sites:
        site.install(model, Int8Weight(*cached[site.name]))
    # no product needs the flat batch padded to row tiles any more (a float LM head pads its own few rows)
    model.pads_row_tiles = False
    return source


def quantized_cache_path(folder: Path, cache_dir: str | Path | None, model: nn.Module) -> Path:
    """The cache file of this model folder's weights under this recipe: keyed by the recipe, the folder and its
    weight files' sizes and modification times, and the model's class."""
    from judge_engine.loading.cache import engine_cache_dir
    from judge_engine.loading.checkpoint import safetensors_files

    folder = Path(folder).resolve()
    files = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in safetensors_files(folder)]
    identity = {"recipe": RECIPE, "folder": str(folder), "files": files, "model": type(model).__qualname__}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return engine_cache_dir(cache_dir) / "quantized" / f"{folder.name[:40]}-{key}.safetensors"


def _read_cache(path: Path, sites: list[_Site], model: nn.Module) -> dict | None:
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
                if tuple(q.shape) != site.shape(model) or q.dtype != torch.int8:
                    return None
                loaded[site.name] = (q, scale)
            return loaded
    except (OSError, RuntimeError, ValueError, SafetensorError) as exc:  # a damaged file is rebuilt
        log.warning("int8: ignoring unreadable cache %s: %s", path, exc)
        return None


def _write_cache(path: Path, weights: dict, folder: Path) -> None:
    """Written beside its final name and renamed into place, so a half-written file is never read."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for name, (q, scale) in weights.items():
        tensors[f"{name}.qweight"], tensors[f"{name}.scale"] = q, scale
    handle, staging = tempfile.mkstemp(prefix=".quantizing-", suffix=".safetensors", dir=path.parent)
    os.close(handle)
    try:
        save_file(tensors, staging, metadata={"recipe": RECIPE, "folder": str(folder)})
        os.chmod(staging, 0o644)
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
