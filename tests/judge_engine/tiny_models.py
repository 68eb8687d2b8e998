"""Test helpers shared by the engine tests: tiny random HF checkpoints and simple paged layouts.

Import from a test module in tests/judge_engine with ``from tiny_models import ...`` (pytest puts this
folder on sys.path because it has no __init__.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from judge_engine.layers.attention.metadata import AttentionMetadata

TINY_VOCAB = 320

# Each entry: the transformers config class name and the keyword arguments that make the family distinct.
TINY_FAMILIES: dict[str, tuple[str, dict]] = {
    "llama": ("LlamaConfig", {"rope_theta": 10000.0, "tie_word_embeddings": False}),
    "llama3-scaled": (
        "LlamaConfig",
        {
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            "tie_word_embeddings": True,
        },
    ),
    "mistral": ("MistralConfig", {"rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": False}),
    "qwen2": ("Qwen2Config", {"rope_theta": 1000000.0, "tie_word_embeddings": True, "use_sliding_window": False}),
    "qwen3": ("Qwen3Config", {"rope_theta": 1000000.0, "tie_word_embeddings": False, "head_dim": 24}),
    # small caps so that tanh bends the scores and logits of a tiny random model; a window shorter than the
    # prompts; query_pre_attn_scalar unlike head_dim, so the wrong scale shows
    "gemma2": ("Gemma2Config", {"head_dim": 16, "sliding_window": 16, "query_pre_attn_scalar": 24,
                                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 5.0,
                                "tie_word_embeddings": True}),
    # long-rope served within its original context: the short factors, and an attention factor that scales
    "phi3": ("Phi3Config", {"original_max_position_embeddings": 512, "rope_parameters": {
        "rope_type": "longrope", "rope_theta": 10000.0, "attention_factor": 1.25,
        "short_factor": [1.0 + 0.4 * i for i in range(8)], "long_factor": [3.0 + 2 * i for i in range(8)]}}),
}


def tiny_config(family: str, **overrides):
    """A small config of the family: 2 layers, hidden 64, 4 query heads over 2 KV heads (GQA)."""
    import transformers

    class_name, family_kwargs = TINY_FAMILIES[family]
    kwargs = dict(
        vocab_size=TINY_VOCAB,
        hidden_size=64,
        intermediate_size=112,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    kwargs.update(family_kwargs)
    kwargs.update(overrides)
    return getattr(transformers, class_name)(**kwargs)


def save_tiny_checkpoint(family: str, folder: Path, seed: int = 0, **overrides) -> Path:
    """A randomly initialised transformers model of ``family`` saved with save_pretrained into ``folder``.

    The weights are drawn with a larger spread than the HF default so that logits differ clearly between
    tokens and a wrong layout shows up as a large error. Returns ``folder``.
    """
    import transformers

    config = tiny_config(family, **overrides)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
            else:
                param.copy_(0.08 * torch.randn_like(param))
    model.save_pretrained(folder)
    return Path(folder)


def contiguous_layout(
    query_lens: list[int],
    context_lens: list[int],
    block_size: int,
    *,
    shuffle_seed: int | None = None,
    extra_blocks: int = 0,
    padding_tokens: int = 0,
) -> tuple[AttentionMetadata, int, list[list[int]]]:
    """Metadata for a batch where sequence ``b`` has ``query_lens[b]`` new tokens ending its context.

    Every sequence gets its own blocks (shuffled when ``shuffle_seed`` is given, so that block tables
    matter); ``padding_tokens`` extra query rows with slot -1 are appended at the end of the flat batch.
    Returns the metadata, the number of cache blocks to allocate and the per-sequence slot of every
    context position (``slots[b][p]``), so a test can fill the cached prefix.
    """
    needed = [-(-length // block_size) for length in context_lens]
    num_blocks = sum(needed) + extra_blocks
    order = list(range(num_blocks))
    if shuffle_seed is not None:
        order = torch.randperm(num_blocks, generator=torch.Generator().manual_seed(shuffle_seed)).tolist()
    tables, position_slots, next_block = [], [], 0
    for count, length in zip(needed, context_lens):
        table = order[next_block : next_block + count]
        next_block += count
        tables.append(table)
        position_slots.append([table[p // block_size] * block_size + p % block_size for p in range(length)])
    width = max(needed) if needed else 0
    block_tables = torch.full((len(context_lens), max(width, 1)), -1, dtype=torch.int32)
    for b, table in enumerate(tables):
        block_tables[b, : len(table)] = torch.tensor(table, dtype=torch.int32)
    new_slots = [slot for b, q_len in enumerate(query_lens) for slot in position_slots[b][context_lens[b] - q_len :]]
    new_slots += [-1] * padding_tokens
    cu = [0]
    for q_len in query_lens:
        cu.append(cu[-1] + q_len)
    meta = AttentionMetadata(
        slot_mapping=torch.tensor(new_slots, dtype=torch.int64),
        cu_seqlens_q=torch.tensor(cu, dtype=torch.int32),
        context_lens=torch.tensor(context_lens, dtype=torch.int32),
        block_tables=block_tables,
        max_seqlen_q=max(query_lens) if query_lens else 0,
        max_context_len=max(context_lens) if context_lens else 0,
        is_decode=bool(query_lens) and all(q_len == 1 for q_len in query_lens),
    )
    return meta, num_blocks, position_slots


def allocate_kv_caches(spec, num_blocks: int, block_size: int, dtype=torch.float32) -> list[tuple[torch.Tensor, ...]]:
    """One zeroed K and V cache per layer, shaped as the contract says."""
    shape = (num_blocks, block_size, spec.num_kv_heads, spec.head_dim)
    return [(torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)) for _ in range(spec.num_layers)]


def run_chunks(model, spec, prompts: list[list[int]], chunk_lens: list[list[int]], block_size=16, dtype=torch.float32):
    """Feed every prompt through our model in steps (step ``s`` feeds ``chunk_lens[b][s]`` new tokens of prompt ``b``).

    All prompts share each step's flat batch, so later steps attend to a cached prefix; a step where every
    sequence feeds one token runs the decode path. Returns the float32 logits of every prompt position,
    one ``[len, V]`` tensor per prompt.
    """
    total = [len(p) for p in prompts]
    meta_full, num_blocks, slots = contiguous_layout(total, total, block_size, shuffle_seed=1)
    caches = allocate_kv_caches(spec, num_blocks, block_size, dtype)
    done = [0] * len(prompts)
    logits: list[list[torch.Tensor]] = [[] for _ in prompts]
    for step in range(len(chunk_lens[0])):
        active = [b for b in range(len(prompts)) if chunk_lens[b][step] > 0]
        ids, positions, slot_mapping, cu = [], [], [], [0]
        for b in active:
            new = range(done[b], done[b] + chunk_lens[b][step])
            ids += [prompts[b][p] for p in new]
            positions += list(new)
            slot_mapping += [slots[b][p] for p in new]
            cu.append(cu[-1] + len(new))
        context = [done[b] + chunk_lens[b][step] for b in active]
        meta = AttentionMetadata(
            slot_mapping=torch.tensor(slot_mapping, dtype=torch.int64),
            cu_seqlens_q=torch.tensor(cu, dtype=torch.int32),
            context_lens=torch.tensor(context, dtype=torch.int32),
            block_tables=meta_full.block_tables[active],
            max_seqlen_q=max(chunk_lens[b][step] for b in active),
            max_context_len=max(context),
            is_decode=all(chunk_lens[b][step] == 1 for b in active),
        )
        with torch.no_grad():
            hidden = model(torch.tensor(ids), torch.tensor(positions), meta, caches)
            out = model.compute_logits(hidden)
        for i, b in enumerate(active):
            logits[b].append(out[cu[i] : cu[i + 1]])
            done[b] += chunk_lens[b][step]
    return [torch.cat(parts) for parts in logits]


def reference_logits(folder: Path, prompts: list[list[int]], dtype=torch.float32) -> list[torch.Tensor]:
    """transformers' own logits for each prompt, computed one prompt at a time (float32 output)."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    with torch.no_grad():
        return [model(torch.tensor([p])).logits[0].float() for p in prompts]


GGUF_NAMES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def write_tiny_gguf(hf_folder: Path, gguf_path: Path, quant: str = "F32") -> dict[str, "np.ndarray"]:
    """Write the HF checkpoint in ``hf_folder`` as a GGUF file the way llama.cpp's converter lays it out.

    2-D weights are stored as ``quant`` (F32, F16, Q8_0, Q4_0, Q4_1, ...; rows must be multiples of 32
    for the block formats), norms and biases as F32; Q/K rows are permuted for the llama architecture.
    ``quant`` "Q4_K_M": the K formats gguf-py cannot quantize, as random blocks (random_blocks), V and down
    maps in Q6_K and the others in Q4_K as llama.cpp's Q4_K_M mixes them (rows must be multiples of 256).
    No tokenizer is embedded. Returns the float32 tensors a correct converter must recover (HF names):
    the originals passed through the quantization round trip (the random blocks' values for Q4_K_M).
    """
    import json

    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    from judge_engine.loading.gguf import permute_rows

    config = json.loads((Path(hf_folder) / "config.json").read_text())
    arch = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}[config["model_type"]]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    writer = gguf.GGUFWriter(str(gguf_path), arch=arch)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(config.get("rope_parameters", {}).get("rope_theta") or config["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    qtype = gguf.GGMLQuantizationType["F32" if quant == "Q4_K_M" else quant]
    rng = np.random.default_rng(0)
    expected = {}
    for name, array in load_file(str(Path(hf_folder) / "model.safetensors")).items():
        array = array.astype(np.float32)
        gguf_name = _gguf_name(name)
        if arch == "llama" and ".attn_q." in gguf_name:
            array = permute_rows(array, heads)
        elif arch == "llama" and ".attn_k." in gguf_name:
            array = permute_rows(array, kv_heads)
        if array.ndim == 2 and quant == "Q4_K_M":
            kind = "Q6_K" if (".attn_v." in gguf_name or ".ffn_down." in gguf_name) else "Q4_K"
            stored = random_blocks(kind, array.size // 256, rng).reshape(array.shape[0], -1)
            writer.add_tensor(gguf_name, stored, raw_dtype=gguf.GGMLQuantizationType[kind])
            round_trip = gguf.quants.dequantize(stored, gguf.GGMLQuantizationType[kind]).reshape(array.shape)
        elif array.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            stored = gguf.quants.quantize(array, qtype)
            writer.add_tensor(gguf_name, stored, raw_dtype=qtype)
            round_trip = gguf.quants.dequantize(stored, qtype).reshape(array.shape).astype(np.float32)
        else:
            writer.add_tensor(gguf_name, array)
            round_trip = array
        if arch == "llama" and ".attn_q." in gguf_name:
            round_trip = _unpermute(round_trip, heads)
        elif arch == "llama" and ".attn_k." in gguf_name:
            round_trip = _unpermute(round_trip, kv_heads)
        expected[name] = round_trip
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return expected


# where each block format keeps its float16 scale fields (d, and m or dmin), in bytes from the block's start
FLOAT16_FIELDS = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q4_K": (0, 2),
                  "Q5_K": (0, 2), "Q6_K": (208,)}


def random_blocks(kind: str, count: int, rng) -> "np.ndarray":
    """``count`` blocks of format ``kind`` with random codes and random finite scales of either sign: uint8
    [count, bytes per block]."""
    import gguf
    import numpy as np

    _, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[kind]]
    blocks = rng.integers(0, 256, size=(count, block_bytes), dtype=np.uint8)
    for start in FLOAT16_FIELDS[kind]:
        scales = rng.uniform(-0.02, 0.02, size=count).astype(np.float16)
        blocks[:, start:start + 2] = scales.view(np.uint8).reshape(count, 2)
    return blocks


def _unpermute(array, num_heads):
    """Inverse of llama.cpp's permutation, written independently of the code under test."""
    rows = array.shape[0] // num_heads
    return array.reshape(num_heads, rows // 2, 2, *array.shape[1:]).swapaxes(1, 2).reshape(array.shape)


def _gguf_name(hf_name: str) -> str:
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf_name.split(".", 3)
    module, _, kind = rest.rpartition(".")
    return f"blk.{layer}.{GGUF_NAMES[module]}.{kind}"


@dataclass(frozen=True)
class EmbeddedModel:
    gguf: Path  # the cached .gguf, as resolve_model_path(None) returns it
    folder: Path  # its converted HF folder


@pytest.fixture(scope="session")
def embedded_model() -> EmbeddedModel:
    """The embedded SmolLM2 from the engine's cache ($JUDGE_ENGINE_CACHE or ~/.cache/judge_engine), fetched if
    absent.

    Import this fixture into a test module (``from tiny_models import embedded_model``); tests using it
    should be marked slow.
    """
    from judge_engine.loading.gguf import converted_folder
    from judge_engine.loading.weights import EMBEDDED_GGUF_SHA256, EmbeddedModelError, resolve_model_path

    try:
        gguf_path = resolve_model_path(None)
    except EmbeddedModelError as error:
        pytest.skip(f"embedded model unavailable: {error}")
    return EmbeddedModel(gguf_path, converted_folder(gguf_path, sha256=EMBEDDED_GGUF_SHA256))
