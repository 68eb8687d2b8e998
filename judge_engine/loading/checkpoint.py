"""An HF checkpoint folder's safetensors: which files hold the weights (read by weight_source.py, hashed by
weights.model_identity), and the header of one written tensor by tensor (gguf.py's float32 conversion,
quantization.py's int8 cache)."""

from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class TensorSlot:
    """A tensor's entry in a safetensors header: its name, safetensors dtype ("F32", "I8", ...), shape and bytes."""
    name: str
    dtype: str
    shape: list[int]
    size: int


def safetensors_header(slots: list[TensorSlot], metadata: dict[str, str]) -> tuple[bytes, dict[str, int]]:
    """What a safetensors file starts with, the tensors' data laid out one after another in this order: a
    little-endian u64 header length, the JSON header (names, dtypes, shapes, byte offsets; padded to 8 bytes). And
    each tensor's start within the data, which follows the header."""
    header: dict = {"__metadata__": metadata}
    starts: dict[str, int] = {}
    offset = 0
    for slot in slots:
        header[slot.name] = {"dtype": slot.dtype, "shape": slot.shape, "data_offsets": [offset, offset + slot.size]}
        starts[slot.name] = offset
        offset += slot.size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    return len(encoded).to_bytes(8, "little") + encoded, starts
