"""An HF checkpoint folder's safetensors: which files hold the weights (read by weight_source.py, hashed by
weights.model_identity)."""

from __future__ import annotations

import json
from pathlib import Path


def safetensors_files(folder: Path) -> list[Path]:
    """The shards named by model.safetensors.index.json, else every *.safetensors in the folder."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        files = sorted({folder / name for name in weight_map.values()})
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no *.safetensors weights (only safetensors checkpoints are supported)")
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"{index}: names shard {file.name}, which is missing")
    return files
