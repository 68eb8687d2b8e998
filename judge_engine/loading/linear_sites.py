"""A model's linear maps as a loader that replaces their float weights sees them: where each map's weight lives
(``LinearSite``: a merged Q/K/V or gate/up map, an output or down projection, the LM head), which checkpoint
tensors feed it (``site_feeds``), and the checkpoint's other tensors read with placeholders for those
(``tensors_besides``). Used by the int8 loader (quantization.py) and the GGUF block loader (gguf_resident.py)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from judge_engine.loading.weight_source import WeightSource


@dataclass
class LinearSite:
    name: str          # a stable name in the cache file
    owner: nn.Module
    attribute: str     # the owner's weight attribute; "merged" for a MergedLinear; "logits_head" for the LM head

    def shape(self, model: nn.Module) -> tuple[int, int]:
        if self.attribute == "merged":
            return sum(self.owner.out_sizes), self.owner.in_features
        if self.attribute == "logits_head":
            return tuple((model.embed_tokens if model.lm_head is None else model.lm_head).shape)
        return tuple(getattr(self.owner, self.attribute).shape)

    def parts(self) -> int:
        """How many checkpoint tensors feed this map (a merged map's parts: Q, K, V or gate, up)."""
        return len(self.owner.out_sizes) if self.attribute == "merged" else 1

    def install(self, model: nn.Module, weight: nn.Module) -> None:
        """Make ``weight`` (an Int8Weight, a BlockWeight) this map's weight, dropping the float one."""
        if self.attribute == "merged":
            self.owner.use_weight(weight)
            return
        if self.attribute == "logits_head":
            model.logits_head = weight
            if model.lm_head is not None:  # untied: the float head is no longer read
                del model.lm_head
                model.lm_head = weight
            return
        delattr(self.owner, self.attribute)  # drop the float Parameter; the Int8Weight takes its name
        setattr(self.owner, self.attribute, weight)


@dataclass(frozen=True)
class SiteFeed:
    """A checkpoint tensor that is (part of) a site's weight: ``part`` is its rows' place in a merged map (None:
    the whole weight, as Phi-3 stores its fused maps)."""
    site: LinearSite
    part: int | None


def linear_sites(model: nn.Module) -> list[LinearSite]:
    from judge_engine.models.llama import LlamaAttention, LlamaMLP
    from judge_engine.layers.merged_linear import MergedLinear

    sites = []
    for name, module in model.named_modules():
        if isinstance(module, MergedLinear):
            sites.append(LinearSite(name, module, "merged"))
        elif isinstance(module, LlamaAttention):
            sites.append(LinearSite(f"{name}.o_proj", module, "o_weight"))
        elif isinstance(module, LlamaMLP):
            sites.append(LinearSite(f"{name}.down_proj", module, "down_weight"))
    sites.append(LinearSite("lm_head", model, "logits_head"))
    return sites


def site_feeds(model: nn.Module, sites: list[LinearSite]) -> dict[str, SiteFeed]:
    """Checkpoint tensor name -> the site its values go to, from the model's own checkpoint map."""
    by_owner = {(id(site.owner), site.attribute): site for site in sites}
    merged = {id(site.owner): site for site in sites if site.attribute == "merged"}
    feeds = {}
    for name, (owner, attribute, part) in model._checkpoint_targets().items():
        if id(owner) in merged and attribute == "weight":
            feeds[name] = SiteFeed(merged[id(owner)], part)
        elif (id(owner), attribute) in by_owner:
            feeds[name] = SiteFeed(by_owner[(id(owner), attribute)], None)
    head = "model.embed_tokens.weight" if model.lm_head is None else "lm_head.weight"
    feeds[head] = SiteFeed(sites[-1], None)
    return feeds


def keep_merged_parts_apart(model: nn.Module) -> None:
    """Before the checkpoint is loaded: merged maps keep the checkpoint's parts as they are, without a float copy to
    fuse them (their int8 rows, or their blocks, replace them)."""
    from judge_engine.layers.merged_linear import MergedLinear

    for module in model.modules():
        if isinstance(module, MergedLinear):
            module.always_fuse = False


EMBEDDINGS = "model.embed_tokens.weight"


def tensors_besides(source: WeightSource, skipped: set[str], dtype: torch.dtype = torch.float32):
    """The source's tensors for load_weights, those in ``skipped`` as placeholders of their shape that hold no
    memory (a zero-stride view of one element, in the model's ``dtype`` so that it is adopted, not converted into a
    full copy; they are replaced before any product reads them)."""
    for tensor in source.tensors():
        if tensor.name in skipped:
            yield tensor.name, torch.empty((), dtype=dtype).expand(tensor.shape)
        else:
            yield tensor.name, tensor.load()
