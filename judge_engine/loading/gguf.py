"""Convert a .gguf file of a registered family (models/registry.py) into a cached HF folder: config.json and the
tokenizer always, model.safetensors when a float engine asks for it.

For the float32 weights every tensor is dequantized once; later start-ups read the safetensors file, which takes a
fraction of a second, instead of parsing and dequantizing the GGUF again. An int8 engine never asks for them: it
reads the GGUF's tensors one at a time into its own int8 cache (judge_engine/loading/quantization.py) and looks up
embedding rows in the GGUF itself (judge_engine/loading/weight_source.py), so no float32 copy is ever written.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from judge_engine.loading.cache import cache_lock, engine_cache_dir, staged_file
from judge_engine.models.errors import ModelConfigError
from judge_engine.models.registry import GGUFLayout, UnsupportedArchitecture, gguf_layout
from judge_engine.layers.rope import inverse_frequencies

# llama.cpp's per-layer tensor names -> HF names, as the Llama family has them (a family's GGUFLayout.layer_tensors
# overrides or adds names)
LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
ROPE_FACTORS = "rope_freqs.weight"
CONVERSION_VERSION = 1  # bump when the converted layout changes, so stale caches are rebuilt
FLOAT_WEIGHTS = "model.safetensors"


class GGUFConversionError(ModelConfigError):
    """The .gguf file cannot be converted (unsupported architecture, tensor or metadata)."""


def converted_folder(gguf_path: Path, sha256: str | None = None, cache_dir: str | Path | None = None,
                     weights: bool = True) -> Path:
    """The HF folder converted from ``gguf_path`` under ``cache_dir`` (None: the engine's cache), converting it
    first if this file was never converted; ``weights``: with its float32 model.safetensors (written now if an
    earlier conversion left them out)."""
    gguf_path = Path(gguf_path).resolve()
    sha256 = sha256 or file_sha256(gguf_path, cache_dir)
    root = engine_cache_dir(cache_dir) / "converted"
    folder = root / f"{sha256[:16]}-v{CONVERSION_VERSION}"
    if _converted(folder, weights):
        return folder
    with cache_lock(root):
        if not (folder / "config.json").is_file():  # another process may have converted it meanwhile
            _convert_into(gguf_path, sha256, root, folder, weights)
        elif not _converted(folder, weights):
            _add_float_weights(gguf_path, folder)
    return folder


def _converted(folder: Path, weights: bool) -> bool:
    return (folder / "config.json").is_file() and (not weights or (folder / FLOAT_WEIGHTS).is_file())


def _convert_into(gguf_path: Path, sha256: str, root: Path, folder: Path, weights: bool) -> None:
    """Convert in a staging folder renamed into place at the end, so a half-written folder is never used."""
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=root))
    try:
        started = time.perf_counter()
        what = "to safetensors" if weights else "metadata and tokenizer"
        print(f"judge_engine: converting {gguf_path.name} {what} (once)...", file=sys.stderr, flush=True)
        convert_gguf(gguf_path, staging, weights)
        (staging / "source.json").write_text(json.dumps({"gguf": str(gguf_path), "sha256": sha256}, indent=2))
        _make_readable(staging)
        os.replace(staging, folder)
        print(f"judge_engine: converted in {time.perf_counter() - started:.1f}s -> {folder}", file=sys.stderr)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _add_float_weights(gguf_path: Path, folder: Path) -> None:
    """The float32 weights of a folder converted without them, written beside their name and renamed into place."""
    started = time.perf_counter()
    print(f"judge_engine: writing the float32 weights of {gguf_path.name} (once)...", file=sys.stderr, flush=True)
    planned = [p for p in indexed_tensors(gguf_path, folder) if p.name != ROPE_FACTORS]
    with staged_file(folder / FLOAT_WEIGHTS, ".converting-") as staging:
        write_safetensors(staging, planned)
    print(f"judge_engine: wrote them in {time.perf_counter() - started:.1f}s", file=sys.stderr)


def _make_readable(folder: Path) -> None:
    """mkdtemp creates a private folder; the cache is meant to be shared like any other download."""
    folder.chmod(0o755)
    for file in folder.iterdir():
        file.chmod(0o644)


def convert_gguf(gguf_path: Path, folder: Path, weights: bool = True) -> None:
    """Write config.json, generation_config.json, the tokenizer files and (``weights``) model.safetensors into
    ``folder``.

    The tokenizer is converted in a child process while the tensors are dequantized (transformers parses the whole
    GGUF vocabulary again: on a 150k-token model that takes as long as the weights), and the tensors are written one
    at a time, so converting needs the memory of the largest tensor, not of the whole float32 model."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))
    tokenizer = _start_tokenizer_conversion(gguf_path, folder) if "tokenizer.ggml.tokens" in reader.fields else None
    try:
        metadata = metadata_of(reader)
        planned = planned_tensors(reader, metadata, str(gguf_path))
        rope = next((p for p in planned if p.name == ROPE_FACTORS), None)
        rope_factors = torch.from_numpy(rope.values()) if rope is not None else None
        planned = [p for p in planned if p.name != ROPE_FACTORS]
        shapes = {p.name: torch.empty(p.shape, device="meta") for p in planned}
        config = hf_config(metadata, shapes, str(gguf_path), rope_factors)
        write_tensor_index(folder, planned)
        if weights:
            write_safetensors(folder / FLOAT_WEIGHTS, planned)
        (folder / "config.json").write_text(json.dumps(config, indent=2))
        generation = {key: config[key] for key in ("bos_token_id", "eos_token_id", "pad_token_id") if key in config}
        (folder / "generation_config.json").write_text(json.dumps(generation, indent=2))
    except BaseException:
        if tokenizer is not None:
            tokenizer.kill()
            tokenizer.wait()
        raise
    if tokenizer is not None:
        _finish_tokenizer_conversion(tokenizer, gguf_path)


def metadata_of(reader) -> dict[str, Any]:
    """The file's metadata fields, less the tokenizer's vocabulary (all but its special token ids)."""
    metadata = {name: field.contents() for name, field in reader.fields.items() if not name.startswith("tokenizer.ggml.")}
    for name in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"):
        if name in reader.fields:
            metadata[name] = reader.fields[name].contents()
    return metadata


@dataclass
class PlannedTensor:
    """A GGUF tensor under its HF name and shape, dequantized (float32, Q/K rows unpermuted) when asked."""
    name: str
    shape: list[int]
    source: Any          # the gguf ReaderTensor
    unpermute_heads: int = 0
    where: str = ""

    def values(self) -> np.ndarray:
        from gguf import GGMLQuantizationType, dequantize

        try:
            values = dequantize(self.source.data, GGMLQuantizationType(self.source.tensor_type))
        except NotImplementedError as error:
            raise GGUFConversionError(f"{self.where}: tensor {self.source.name}: {error}") from None
        # a writable float32 array: a copy only where dequantize returned the memory-mapped file itself (F32)
        values = np.require(values, dtype=np.float32, requirements=["C", "W"]).reshape(self.shape)
        return unpermute_rows(values, self.unpermute_heads) if self.unpermute_heads else values


@dataclass
class IndexedTensor:
    """A GGUF tensor found through the index a conversion wrote (``TENSOR_INDEX``): what PlannedTensor reads of a
    gguf ReaderTensor, without parsing the file's metadata again (a 150k-token vocabulary takes seconds)."""
    name: str
    tensor_type: int
    dims: tuple[int, ...]     # the GGUF's order, fastest dimension first
    data_offset: int
    path: str

    @functools.cached_property
    def data(self) -> np.ndarray:
        """A memory map of the tensor's bytes, shaped as GGUFReader shapes it (a quantized row's bytes per row)."""
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
        from gguf.quants import quant_shape_to_byte_shape

        kind = GGMLQuantizationType(self.tensor_type)
        shape = tuple(reversed(self.dims))
        elements = int(np.prod(self.dims, dtype=np.int64))
        if kind.name in _PLAIN_TYPES:
            dtype, count = _PLAIN_TYPES[kind.name], elements
        else:
            block_size, type_size = GGML_QUANT_SIZES[kind]
            dtype, count, shape = np.uint8, elements * type_size // block_size, quant_shape_to_byte_shape(shape, kind)
        return np.memmap(self.path, dtype=dtype, mode="r", offset=self.data_offset, shape=(count,)).reshape(shape)


_PLAIN_TYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I8": np.int8, "I16": np.int16,
                "I32": np.int32, "I64": np.int64}
TENSOR_INDEX = "gguf-tensors.json"


def write_tensor_index(folder: Path, planned: list[PlannedTensor]) -> None:
    """Where each tensor lies in the GGUF, under its HF name, for later start-ups (indexed_tensors)."""
    rows = [{"name": p.name, "shape": p.shape, "unpermute_heads": p.unpermute_heads, "gguf_name": p.source.name,
             "tensor_type": int(p.source.tensor_type), "dims": [int(n) for n in p.source.shape],
             "data_offset": int(p.source.data_offset)} for p in planned]
    staging = folder / f".{TENSOR_INDEX}.{os.getpid()}"
    staging.write_text(json.dumps(rows))
    os.replace(staging, folder / TENSOR_INDEX)


def indexed_tensors(gguf_path: Path, folder: Path) -> list[PlannedTensor]:
    """The GGUF's tensors as planned_tensors gives them, from the folder's index (written now if a conversion of
    an earlier version left it out)."""
    index = folder / TENSOR_INDEX
    if not index.is_file():
        from gguf import GGUFReader

        reader = GGUFReader(str(gguf_path))
        write_tensor_index(folder, planned_tensors(reader, metadata_of(reader), str(gguf_path)))
    return [PlannedTensor(row["name"], row["shape"],
                          IndexedTensor(row["gguf_name"], row["tensor_type"], tuple(row["dims"]), row["data_offset"],
                                        str(gguf_path)),
                          row["unpermute_heads"], str(gguf_path))
            for row in json.loads(index.read_text(encoding="utf-8"))]


def planned_tensors(reader, metadata: dict[str, Any], source: str) -> list[PlannedTensor]:
    """Every tensor of the file under its HF name, not yet dequantized."""
    layout = _layout(metadata, source)
    architecture, permuted = layout.gguf_architecture, layout.permuted_qk
    num_heads = int(metadata[f"{architecture}.attention.head_count"])
    num_kv_heads = int(metadata.get(f"{architecture}.attention.head_count_kv", num_heads))
    planned = []
    for tensor in reader.tensors:
        # rope_freqs (Llama 3 RoPE scaling factors) has no HF counterpart; hf_config turns it into rope_scaling
        name = tensor.name if tensor.name == ROPE_FACTORS else hf_tensor_name(tensor.name, source, layout)
        shape = [int(n) for n in reversed(tensor.shape.tolist())]  # GGUF lists the fastest dimension first
        heads = 0
        if permuted and tensor.name.endswith(("attn_q.weight", "attn_q.bias")):
            heads = num_heads
        elif permuted and tensor.name.endswith(("attn_k.weight", "attn_k.bias")):
            heads = num_kv_heads
        planned.append(PlannedTensor(name, shape, tensor, heads, source))
    return planned


def dequantized_tensors(reader, metadata: dict[str, Any], source: str) -> dict[str, torch.Tensor]:
    """float32 tensors under HF names, with llama.cpp's Q/K row permutation undone where it applies."""
    return {p.name: torch.from_numpy(p.values()) for p in planned_tensors(reader, metadata, source)}


def write_safetensors(path: Path, planned: list[PlannedTensor]) -> None:
    """The safetensors format written tensor by tensor (checkpoint.safetensors_header), each dequantized float32."""
    from judge_engine.loading.checkpoint import TensorSlot, safetensors_header

    slots = [TensorSlot(p.name, "F32", p.shape, 4 * int(np.prod(p.shape, dtype=np.int64))) for p in planned]
    header, _ = safetensors_header(slots, {"format": "pt"})
    with path.open("wb") as out:
        out.write(header)
        for p in planned:
            values = p.values()
            if values.dtype.byteorder == ">":
                values = values.byteswap()
            out.write(memoryview(np.ascontiguousarray(values)).cast("B"))


def _start_tokenizer_conversion(gguf_path: Path, folder: Path):
    import subprocess

    from judge_engine.loading.child_env import child_env

    code = ("import sys; from pathlib import Path; from judge_engine.loading.gguf import _save_tokenizer; "
            "_save_tokenizer(Path(sys.argv[1]), Path(sys.argv[2]))")
    return subprocess.Popen([sys.executable, "-c", code, str(gguf_path), str(folder)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=child_env())


def _finish_tokenizer_conversion(process, gguf_path: Path) -> None:
    _, errors = process.communicate()
    if process.returncode != 0:
        detail = " | ".join((errors or "").strip().splitlines()[-3:])
        raise GGUFConversionError(f"{gguf_path}: the tokenizer could not be converted: {detail}")


def unpermute_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's conversion, which interleaves the two rotary halves of every head's rows."""
    head_rows = weight.shape[0] // num_heads
    split = weight.reshape(num_heads, head_rows // 2, 2, *weight.shape[1:])
    return np.ascontiguousarray(split.swapaxes(1, 2).reshape(weight.shape))


def permute_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """llama.cpp's permutation (the inverse of ``unpermute_rows``); used to write GGUF files in tests."""
    head_rows = weight.shape[0] // num_heads
    split = weight.reshape(num_heads, 2, head_rows // 2, *weight.shape[1:])
    return np.ascontiguousarray(split.swapaxes(1, 2).reshape(weight.shape))


def hf_tensor_name(gguf_name: str, source: str, layout: GGUFLayout) -> str:
    base, _, kind = gguf_name.rpartition(".")
    parts = base.split(".")
    layer_tensors = {**LAYER_TENSORS, **layout.layer_tensors}
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in layer_tensors:
        return f"model.layers.{parts[1]}.{layer_tensors[parts[2]]}.{kind}"
    if base in GLOBAL_TENSORS:
        return f"{GLOBAL_TENSORS[base]}.{kind}"
    raise GGUFConversionError(f"{source}: tensor {gguf_name!r} has no counterpart in a {layout.hf_architecture} model")


def hf_config(
    metadata: dict[str, Any], tensors: dict[str, torch.Tensor], source: str, rope_factors: torch.Tensor | None = None
) -> dict[str, Any]:
    """config.json contents from the GGUF metadata (and tensor shapes where the metadata is silent)."""
    layout = _layout(metadata, source)
    arch = layout.gguf_architecture

    def meta(key: str, default: Any = ...) -> Any:
        value = metadata.get(f"{arch}.{key}", default)
        if value is ...:
            raise GGUFConversionError(f"{source}: metadata field {arch}.{key!r} is missing")
        return value

    num_heads = int(meta("attention.head_count"))
    hidden_size = int(meta("embedding_length"))
    head_dim = int(meta("attention.key_length", hidden_size // num_heads))
    embed = tensors["model.embed_tokens.weight"]
    config: dict[str, Any] = {
        "architectures": [layout.hf_architecture],
        "model_type": layout.model_type,
        "vocab_size": int(embed.shape[0]),
        "hidden_size": hidden_size,
        "intermediate_size": int(meta("feed_forward_length")),
        "num_hidden_layers": int(meta("block_count")),
        "num_attention_heads": num_heads,
        "num_key_value_heads": int(meta("attention.head_count_kv", num_heads)),
        "head_dim": head_dim,
        "max_position_embeddings": int(meta("context_length", 2048)),
        "rms_norm_eps": _shortest_float32(meta("attention.layer_norm_rms_epsilon", 1e-6)),
        "rope_theta": float(meta("rope.freq_base", 10000.0)),
        "hidden_act": "silu",
        "tie_word_embeddings": "lm_head.weight" not in tensors,
        "torch_dtype": "float32",
    }
    if layout.records_attention_bias:
        config["attention_bias"] = "model.layers.0.self_attn.q_proj.bias" in tensors
    rope_dims = int(meta("rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise GGUFConversionError(
            f"{source}: metadata field {arch}.rope.dimension_count: partial rotary is not supported"
        )
    scaling = _rope_scaling(metadata, arch, config, source, rope_factors)
    if scaling is not None:
        config["rope_scaling"] = scaling
    special_tokens = {"bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id", "pad_token_id": "padding_token_id"}
    for key, gguf_key in special_tokens.items():
        value = metadata.get(f"tokenizer.ggml.{gguf_key}")
        if value is not None:
            config[key] = int(value)
    return config


def _rope_scaling(metadata, arch: str, config, source: str, rope_factors) -> dict[str, Any] | None:
    scaling_type = metadata.get(f"{arch}.rope.scaling.type", "none")
    if rope_factors is not None:
        return llama3_scaling_from_factors(rope_factors.numpy(), config, source)
    if scaling_type in ("none", None):
        return None
    if scaling_type == "linear":
        return {"rope_type": "linear", "factor": float(metadata[f"{arch}.rope.scaling.factor"])}
    raise GGUFConversionError(f"{source}: metadata field {arch}.rope.scaling.type {scaling_type!r} is not supported")


def llama3_scaling_from_factors(factors: np.ndarray, config: dict[str, Any], source: str) -> dict[str, Any]:
    """llama.cpp stores Llama 3.1-style RoPE scaling as per-frequency divisors; recover the HF parameters.

    The published Llama 3.x models all use low/high frequency factors 1 and 4 over an original context of
    8192, so those are tried and the result is checked against the stored divisors.
    """
    factors = torch.from_numpy(np.asarray(factors, dtype=np.float32))
    scaling = {
        "rope_type": "llama3",
        "factor": float(factors.max()),
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    plain = inverse_frequencies(config["head_dim"], config["rope_theta"], None)
    scaled = inverse_frequencies(config["head_dim"], config["rope_theta"], scaling)
    if factors.shape != plain.shape or not torch.allclose(plain / scaled, factors, rtol=1e-3):
        raise GGUFConversionError(f"{source}: tensor rope_freqs.weight does not match Llama 3 RoPE scaling")
    return scaling


def _layout(metadata: dict[str, Any], source: str) -> GGUFLayout:
    try:
        return gguf_layout(metadata.get("general.architecture"), source)
    except UnsupportedArchitecture as error:
        raise GGUFConversionError(str(error)) from None


def _save_tokenizer(gguf_path: Path, folder: Path) -> None:
    """transformers builds a fast tokenizer (and chat template) from the GGUF vocabulary; it is saved as files."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    tokenizer.save_pretrained(str(folder))


def file_sha256(path: Path, cache_dir: str | Path | None = None) -> str:
    """sha256 of a file, remembered per (path, size, mtime) under ``cache_dir`` (None: the engine's cache) so
    large files are hashed only once."""
    stat = path.stat()
    memo_path = engine_cache_dir(cache_dir) / "converted" / "sha256-memo.json"
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        memo = {}
    if key in memo:
        return memo[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    memo[key] = digest.hexdigest()
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        staging = memo_path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(json.dumps(memo, indent=1))
        os.replace(staging, memo_path)
    except OSError:
        pass  # a read-only cache only costs hashing the file again next time
    return memo[key]


def _shortest_float32(value: float) -> float:
    """GGUF stores float32: write 1e-05 rather than 9.999999747378752e-06, as the original config had it."""
    return float(str(np.float32(value)))
