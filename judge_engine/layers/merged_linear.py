"""Linear maps that read the same input (Q/K/V, gate/up), run as one matmul when that pays.

A checkpoint stores the parts separately. When they must be copied anyway (a dtype conversion or a
device transfer) they are copied into one fused weight and run as a single matmul. When they already
have the right dtype and device, the memory-mapped checkpoint tensors are used as they are, without any
copy, so a float32 model starts in a fraction of a second; unless ``always_fuse`` asks for the copy
because the parts are slow apart (Q/K/V: the K and V maps of a GQA model have few output rows, and one
matmul reads the input once instead of three times).
"""

from __future__ import annotations

import torch
from torch import nn

from judge_engine.layers.int8_linear import linear


class MergedLinear(nn.Module):
    def __init__(self, in_features: int, out_sizes: list[int], bias: bool, dtype: torch.dtype,
                 always_fuse: bool = False):
        super().__init__()
        self.in_features = in_features
        self.out_sizes = list(out_sizes)
        self.has_bias = bias
        self.dtype = dtype
        self.always_fuse = always_fuse
        self.fused_weight: nn.Parameter | None = None
        self.fused_bias: nn.Parameter | None = None
        self._pending: dict[tuple[int, str], torch.Tensor] = {}
        self._pending_fused: dict[str, torch.Tensor] = {}
        self.part_weights: list[torch.Tensor] | None = None
        self.part_biases: list[torch.Tensor | None] | None = None

    def expected_names(self) -> list[tuple[int, str]]:
        kinds = ("weight", "bias") if self.has_bias else ("weight",)
        return [(index, kind) for index in range(len(self.out_sizes)) for kind in kinds]

    def load_part(self, index: int, kind: str, tensor: torch.Tensor, name: str) -> None:
        rows = self.out_sizes[index]
        expected = (rows, self.in_features) if kind == "weight" else (rows,)
        if tuple(tensor.shape) != expected:
            raise ValueError(f"checkpoint tensor {name!r} has shape {tuple(tensor.shape)}, expected {expected}")
        self._pending[(index, kind)] = tensor

    def load_fused(self, kind: str, tensor: torch.Tensor, name: str) -> None:
        """All parts as the checkpoint stores them in one tensor, rows in part order (Phi-3's qkv_proj and
        gate_up_proj)."""
        rows = sum(self.out_sizes)
        expected = (rows, self.in_features) if kind == "weight" else (rows,)
        if tuple(tensor.shape) != expected:
            raise ValueError(f"checkpoint tensor {name!r} has shape {tuple(tensor.shape)}, expected {expected}")
        self._pending_fused[kind] = tensor

    def finish_loading(self, device: torch.device) -> None:
        """Adopt the parts as they are when possible (and not always_fuse), otherwise copy them into one fused
        weight; a checkpoint's own fused tensor is adopted as the fused weight when its dtype and device fit."""
        if self._pending_fused:
            fused, self._pending_fused = self._pending_fused, {}
            self.fused_weight = self._register("weight", self._converted(fused["weight"], device))
            if self.has_bias:
                self.fused_bias = self._register("bias", self._converted(fused["bias"], device))
            return
        parts = self._pending
        self._pending = {}
        if all(self.adopts_parts(t.dtype, t.device, device) for t in parts.values()):
            count = len(self.out_sizes)
            self.part_weights = [self._register(f"weight_{i}", parts[(i, "weight")]) for i in range(count)]
            self.part_biases = [
                self._register(f"bias_{i}", parts[(i, "bias")]) if self.has_bias else None
                for i in range(count)
            ]
            return
        self.fused_weight = self._register("weight", self._concat(parts, "weight", device))
        if self.has_bias:
            self.fused_bias = self._register("bias", self._concat(parts, "bias", device))

    def adopts_parts(self, dtype: torch.dtype, device: torch.device, target: torch.device) -> bool:
        """Whether a checkpoint's parts of ``dtype`` on ``device`` run as they are (one product each) rather than
        fused into one weight."""
        return not self.always_fuse and dtype == self.dtype and device == target

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self.fused_weight is not None:
            return list(linear(x, self.fused_weight, self.fused_bias).split(self.out_sizes, dim=-1))
        return [linear(x, w, b) for w, b in zip(self.part_weights, self.part_biases)]

    def merged_weight(self) -> torch.Tensor:
        """The loaded weight of all parts, rows in part order (the fused weight, or the parts concatenated)."""
        if self.fused_weight is not None:
            return self.fused_weight
        return torch.cat(self.part_weights)

    def use_weight(self, weight: nn.Module) -> None:
        """Run as one product with ``weight`` (judge_engine/loading/quantization.py's Int8Weight of merged_weight()); the
        float weights are dropped, the biases kept (fused)."""
        bias = None
        if self.has_bias:
            bias = self.fused_bias if self.fused_bias is not None else torch.cat(self.part_biases)
        for name in list(self._parameters):
            del self._parameters[name]
        self.part_weights = self.part_biases = None
        self.fused_weight = weight
        self.fused_bias = None if bias is None else self._register("bias", bias)

    def use_part_weights(self, weights: list[nn.Module]) -> None:
        """Run one product per part with ``weights`` (layers/block_weight.py's BlockWeights of the parts, as a
        float model runs the parts it adopts); the float weights are dropped, the biases kept."""
        biases = self.part_biases if self.part_biases is not None else [None] * len(weights)
        for name in [n for n in self._parameters if n.startswith("weight")]:
            del self._parameters[name]
        self.fused_weight = None
        self.part_weights = nn.ModuleList(weights)
        self.part_biases = biases

    def _converted(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        if tensor.dtype == self.dtype and tensor.device == device:
            return tensor  # the memory-mapped checkpoint tensor itself: no copy
        return tensor.to(device=device, dtype=self.dtype)

    def _concat(self, parts, kind: str, device: torch.device) -> torch.Tensor:
        first = parts[(0, kind)]
        fused = torch.empty((sum(self.out_sizes), *first.shape[1:]), dtype=self.dtype, device=device)
        start = 0
        for index, rows in enumerate(self.out_sizes):
            fused[start : start + rows].copy_(parts[(index, kind)])
            start += rows
        return fused

    def _register(self, name: str, tensor: torch.Tensor) -> nn.Parameter:
        param = nn.Parameter(tensor, requires_grad=False)
        self.register_parameter(name, param)
        return param
