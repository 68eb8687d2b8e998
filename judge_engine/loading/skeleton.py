"""A model built from an HF folder's config.json, its parameters allocated but not yet written: the loader fills
it (loader.py), and the int8 cache's child builds it to learn the linear maps' shapes (quantization.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from judge_engine.layers.attention.backend import get_backend
from judge_engine.models.config import read_config_json
from judge_engine.models.registry import family_for


def model_skeleton(folder: Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                   attention_backend: str | None = None, max_model_len: int | None = None):
    """(model, config): the model of the HF folder's config.json, of its family's classes (models/registry.py), its
    parameters allocated but not written (those an int8 model replaces never cost memory)."""
    device = torch.device(device)
    raw, config_source = read_config_json(folder)
    family, architecture = family_for(raw.get("architectures") or [], config_source)
    config = family.load_config_class().from_folder(folder, architecture)
    if max_model_len is not None and max_model_len < config.max_position_embeddings:
        config = config.serving(max_model_len)
    model_class = family.load_model_class()
    with torch.device(device):
        model = model_class(config, dtype=dtype, attention_backend=get_backend(device, attention_backend))
    return model, config
