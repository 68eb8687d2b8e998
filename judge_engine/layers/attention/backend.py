"""Choice of attention implementation: the torch path (any device) or the Triton kernels (CUDA)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

BACKEND_NAMES = ("torch", "triton")


@dataclass(frozen=True)
class AttentionBackend:
    name: str
    store_kv: Callable[..., None]
    paged_attention: Callable[..., torch.Tensor]


def get_backend(device: torch.device | str, force: str | None = None) -> AttentionBackend:
    """The torch path on CPU or when ``force="torch"``; the Triton kernels on CUDA or when ``force="triton"``
    (on a non-CUDA device only under the Triton interpreter, TRITON_INTERPRET=1, as the kernel tests do)."""
    device = torch.device(device)
    if force is not None and force not in BACKEND_NAMES:
        raise ValueError(f"attention_backend must be one of {BACKEND_NAMES} or None, got {force!r}")
    if force == "torch" or (force is None and device.type != "cuda"):
        return _torch_backend()
    if force == "triton":
        if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
            raise ValueError(f"attention_backend='triton' needs a CUDA device, got device={device} "
                             "(or the Triton interpreter: set TRITON_INTERPRET=1 before starting Python)")
        return _triton_backend()
    try:
        return _triton_backend()
    except ImportError as error:
        warnings.warn(f"{error}; falling back to the torch attention path", RuntimeWarning, stacklevel=2)
        return _torch_backend()


def _torch_backend() -> AttentionBackend:
    from judge_engine.layers.attention import torch_paged

    return AttentionBackend("torch", torch_paged.store_kv, torch_paged.paged_attention)


def _triton_backend() -> AttentionBackend:
    try:
        import triton  # noqa: F401
    except ImportError as error:
        raise ImportError("attention backend 'triton' needs the triton package (pip install triton)") from error
    try:
        from judge_engine.layers import kernels
    except ImportError as error:
        raise ImportError(f"attention backend 'triton': judge_engine.layers.kernels failed to import ({error})") from error
    missing = [name for name in ("store_kv", "paged_attention") if not hasattr(kernels, name)]
    if missing:
        raise ImportError(f"attention backend 'triton': judge_engine.layers.kernels does not export {', '.join(missing)}")
    return AttentionBackend("triton", kernels.store_kv, kernels.paged_attention)
