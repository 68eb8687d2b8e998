"""Where a model's tensors come from: an HF folder's safetensors, or a .gguf file's own quantized blocks.

A source lists its tensors by HF name and shape before reading any of them, so that a loader can skip the ones it
will not use (int8 weights read from their cache) and read the others one at a time (a GGUF tensor is dequantized
only when asked for). An embedding table is read a few rows at a time (``lookup_table``): a GGUF's rows are
dequantized when looked up, so an int8 engine keeps neither a float32 copy of the embeddings in memory nor one on
disk.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class SourceTensor:
    """A checkpoint tensor by HF name; ``load()`` reads it (float, dequantized for a GGUF)."""
    name: str
    shape: tuple[int, ...]
    load: Callable[[], torch.Tensor]


class TensorRows:
    """An embedding table held as a tensor (memory-mapped from safetensors): rows looked up in float32."""

    def __init__(self, table: torch.Tensor):
        self.table = table
        self.shape = table.shape
        self.dtype = torch.float32   # of the rows returned: the model's (a float model's table is converted so)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.embedding(ids, self.table).to(torch.float32).to(self.dtype)


class GGUFRows:
    """An embedding table left in a GGUF's block format (Q4_K, Q6_K, ...): each looked-up row is dequantized with
    the same function the float32 conversion uses, so its values are the converted table's to the bit. A block never
    spans two rows (a row's length is a whole number of blocks), so a row dequantizes alone."""

    def __init__(self, source: Any, shape: tuple[int, int]):
        self.source = source      # gguf.py IndexedTensor: its data maps the file, one row of bytes per table row
        self.shape = torch.Size(shape)
        self.dtype = torch.float32   # of the rows returned (float32 rounded once to it, as a converted table is)

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        from gguf import GGMLQuantizationType, dequantize

        unique, inverse = torch.unique(ids.reshape(-1), return_inverse=True)
        raw = self.source.data[unique.numpy()]
        values = dequantize(raw, GGMLQuantizationType(self.source.tensor_type)).reshape(len(unique), self.shape[1])
        table = torch.from_numpy(values.astype("float32", copy=False))
        return table[inverse].reshape(*ids.shape, self.shape[1]).to(self.dtype)


class SafetensorsSource:
    """An HF checkpoint folder: config.json, tokenizer files and *.safetensors (memory-mapped, read lazily)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @property
    def origin(self) -> Path:
        """The path weight_source() reads this source from again (another process rebuilds it from there)."""
        return self.folder

    def tensors(self) -> Iterator[SourceTensor]:
        from safetensors import safe_open

        from judge_engine.loading.checkpoint import safetensors_files

        for file in safetensors_files(self.folder):
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():
                    shape = tuple(handle.get_slice(name).get_shape())
                    yield SourceTensor(name, shape, lambda handle=handle, name=name: handle.get_tensor(name))

    def lookup_table(self, name: str) -> TensorRows:
        for tensor in self.tensors():
            if tensor.name == name:
                return TensorRows(tensor.load())
        raise KeyError(name)

    def fingerprint(self) -> dict[str, Any]:
        """What the weights' caches are keyed by: the folder and its weight files' sizes and modification times."""
        from judge_engine.loading.checkpoint import safetensors_files

        folder = self.folder.resolve()
        files = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in safetensors_files(folder)]
        return {"folder": str(folder), "files": files}


class GGUFSource:
    """A .gguf file: its tensors under HF names (judge_engine/loading/gguf.py), dequantized one at a time when read;
    ``folder`` holds the config.json and tokenizer converted from its metadata."""

    def __init__(self, gguf_path: Path, folder: Path, sha256: str):
        self.gguf_path, self.folder, self.sha256 = Path(gguf_path), Path(folder), sha256

    @property
    def origin(self) -> Path:
        """The path weight_source() reads this source from again (another process rebuilds it from there)."""
        return self.gguf_path

    @functools.cached_property
    def _planned(self) -> dict:
        from judge_engine.loading.gguf import ROPE_FACTORS, indexed_tensors

        return {p.name: p for p in indexed_tensors(self.gguf_path, self.folder) if p.name != ROPE_FACTORS}

    def tensors(self) -> Iterator[SourceTensor]:
        for planned in self._planned.values():
            yield SourceTensor(planned.name, tuple(planned.shape), lambda p=planned: torch.from_numpy(p.values()))

    def lookup_table(self, name: str) -> GGUFRows | TensorRows:
        planned = self._planned[name]
        if planned.unpermute_heads or len(planned.shape) != 2:
            return TensorRows(torch.from_numpy(planned.values()))
        return GGUFRows(planned.source, (planned.shape[0], planned.shape[1]))

    def tensor_values(self, name: str) -> torch.Tensor:
        """The tensor ``name`` dequantized (float32, Q/K rows unpermuted), as ``tensors()`` reads it."""
        return torch.from_numpy(self._planned[name].values())

    def block_rows(self, name: str):
        """The tensor ``name`` left in its block format (layers/block_weight.py's BlockRows, Q/K rows unpermuted as
        the float32 conversion does); None where its format has no block reader (loading/gguf_blocks.py)."""
        from gguf import GGMLQuantizationType

        from judge_engine.loading.gguf import unpermute_rows
        from judge_engine.loading.gguf_blocks import read_block_rows

        planned = self._planned[name]
        if len(planned.shape) != 2:
            return None
        tensor = planned.source
        rows = read_block_rows(str(self.gguf_path), int(tensor.data_offset),
                               GGMLQuantizationType(tensor.tensor_type).name, *planned.shape)
        if rows is not None and planned.unpermute_heads:   # codes, scales and offsets move with their row
            rows = rows.with_rows(lambda t: torch.from_numpy(unpermute_rows(t.numpy(), planned.unpermute_heads)))
        return rows

    def fingerprint(self) -> dict[str, Any]:
        return {"gguf_sha256": self.sha256}


WeightSource = SafetensorsSource | GGUFSource


def is_gguf_file(path: str | Path) -> bool:
    return Path(path).expanduser().is_file() and Path(path).suffix == ".gguf"


def weight_source(path: str | Path, cache_dir: str | Path | None = None, float_weights: bool = True) -> WeightSource:
    """The source of the model at ``path`` (an HF folder or a .gguf file). A .gguf's metadata is converted once into
    a cached folder (config.json, tokenizer); with ``float_weights`` its float32 safetensors too, read from there."""
    path = Path(path).expanduser()
    if is_gguf_file(path):
        from judge_engine.loading.gguf import converted_folder, file_sha256

        sha256 = file_sha256(path.resolve(), cache_dir)
        folder = converted_folder(path, sha256=sha256, cache_dir=cache_dir, weights=float_weights)
        return SafetensorsSource(folder) if float_weights else GGUFSource(path.resolve(), folder, sha256)
    if path.is_dir():
        return SafetensorsSource(path)
    from judge_engine.models.errors import ModelConfigError

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such model folder or .gguf file")
    raise ModelConfigError(f"{path}: expected an HF model folder (config.json + *.safetensors) or a .gguf file")
