"""int8 straight from a .gguf: no float32 copy of the weights on disk, embeddings looked up in the GGUF's own
blocks, and the same bits as int8 built from the float32 conversion."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from tiny_models import run_chunks, save_tiny_checkpoint, write_tiny_gguf

from judge_engine.loading import quantization
from judge_engine.loading.gguf import converted_folder
from judge_engine.loading.weight_source import GGUFRows, GGUFSource, weight_source
from judge_engine.models import load_model

torch.set_num_threads(min(2, torch.get_num_threads()))

PROMPT = [[5, 9, 200, 17, 3, 80, 81, 5, 9]]


def tiny_gguf(tmp_path, family: str, quant: str):
    hf = save_tiny_checkpoint(family, tmp_path / "hf", intermediate_size=128)
    path = tmp_path / f"tiny-{quant}.gguf"
    write_tiny_gguf(hf, path, quant)
    return path


@pytest.mark.parametrize("family,quant", [("llama", "Q4_1"), ("qwen2", "Q8_0"), ("qwen3", "Q5_1")])
def test_int8_from_a_gguf_writes_no_float32_weights_and_matches_int8_from_the_conversion(tmp_path, family, quant):
    gguf_path = tiny_gguf(tmp_path, family, quant)
    direct_cache, converted_cache = tmp_path / "direct", tmp_path / "converted"
    model, spec = load_model(gguf_path, torch.float32, "cpu", quantization="int8", cache_dir=direct_cache)
    assert model.quantized_from == "built"
    [folder] = (direct_cache / "converted").glob("*-v*")
    assert (folder / "config.json").is_file() and not (folder / "model.safetensors").exists()
    assert isinstance(model.embed_tokens, GGUFRows)
    # the same int8 recipe over the float32 conversion's weights: the same integers, scales and embeddings
    float_folder = converted_folder(gguf_path, cache_dir=converted_cache)
    reference, _ = load_model(float_folder, torch.float32, "cpu", quantization="int8", cache_dir=converted_cache)
    expected = run_chunks(reference, spec, PROMPT, [[4, 5]])[0]
    assert torch.equal(run_chunks(model, spec, PROMPT, [[4, 5]])[0], expected)
    again, _ = load_model(gguf_path, torch.float32, "cpu", quantization="int8", cache_dir=direct_cache)
    assert again.quantized_from == "cache"
    assert torch.equal(run_chunks(again, spec, PROMPT, [[4, 5]])[0], expected)


@pytest.mark.parametrize("quant", ["F32", "Q8_0", "Q4_1"])
def test_gguf_rows_are_the_converted_tables_rows(tmp_path, quant):
    gguf_path = tiny_gguf(tmp_path, "llama", quant)
    table = load_file(converted_folder(gguf_path, cache_dir=tmp_path / "c") / "model.safetensors")[
        "model.embed_tokens.weight"]
    source = weight_source(gguf_path, tmp_path / "c", float_weights=False)
    assert isinstance(source, GGUFSource)
    rows = source.lookup_table("model.embed_tokens.weight")
    ids = torch.tensor([[3, 7, 3], [0, table.shape[0] - 1, 7]])
    looked_up = rows.rows(ids)
    assert looked_up.dtype == torch.float32 and looked_up.shape == (2, 3, table.shape[1])
    assert np.array_equal(looked_up.numpy(), table[ids.numpy()])


def test_a_failed_build_leaves_no_cache_file(tmp_path, monkeypatch):
    gguf_path = tiny_gguf(tmp_path, "llama", "Q8_0")
    calls = []
    original = quantization.quantize_weight

    def fails_on_the_third(weight, group):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("out of memory while quantizing")
        return original(weight, group)

    monkeypatch.setattr(quantization, "quantize_weight", fails_on_the_third)
    with pytest.raises(MemoryError):
        load_model(gguf_path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "c")
    assert [p.name for p in (tmp_path / "c" / "quantized").iterdir()] == [".lock"]
    monkeypatch.setattr(quantization, "quantize_weight", original)
    model, _ = load_model(gguf_path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "c")
    assert model.quantized_from == "built"


@pytest.mark.parametrize("source", ["gguf", "folder"])
def test_a_big_model_is_quantized_in_a_child_process_into_the_same_file(tmp_path, monkeypatch, source):
    """Above CHILD_BUILD_BYTES the cache is built by a child interpreter (whose memory is returned when it exits):
    byte for byte the file this process builds, and the model the same bits. This process's own builder is broken
    meanwhile, so the file can only have come from the child."""
    gguf_path = tiny_gguf(tmp_path, "qwen2", "Q8_0")
    path = gguf_path if source == "gguf" else tmp_path / "hf"
    in_process, _ = load_model(path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "here")
    assert in_process.quantized_from == "built"

    def broken(*args, **kwargs):
        raise AssertionError("built in the parent process")

    monkeypatch.setattr(quantization, "CHILD_BUILD_BYTES", 0)
    monkeypatch.setattr(quantization, "_build_cache", broken)
    model, spec = load_model(path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "child")
    assert model.quantized_from == "built"
    [ours] = (tmp_path / "here" / "quantized").glob("*.safetensors")
    [theirs] = (tmp_path / "child" / "quantized").glob("*.safetensors")
    assert theirs.name == ours.name and theirs.read_bytes() == ours.read_bytes()
    assert torch.equal(run_chunks(model, spec, PROMPT, [[4, 5]])[0], run_chunks(in_process, spec, PROMPT, [[4, 5]])[0])
    again, _ = load_model(path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "child")
    assert again.quantized_from == "cache"


def test_a_failed_child_build_raises_its_error_and_leaves_no_cache_file(tmp_path, monkeypatch):
    gguf_path = tiny_gguf(tmp_path, "llama", "Q8_0")
    failing = tmp_path / "failing-python"
    failing.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
                       "echo 'MemoryError: out of memory while quantizing' >&2\nexit 3\n")
    failing.chmod(0o755)
    monkeypatch.setattr(quantization, "CHILD_BUILD_BYTES", 0)
    monkeypatch.setattr(quantization.sys, "executable", str(failing))
    with pytest.raises(RuntimeError, match=r"(?s)in a child process failed \(exit 3\).*MemoryError: out of memory"):
        load_model(gguf_path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "c")
    assert [p.name for p in (tmp_path / "c" / "quantized").iterdir()] == [".lock"]
    monkeypatch.undo()
    model, _ = load_model(gguf_path, torch.float32, "cpu", quantization="int8", cache_dir=tmp_path / "c")
    assert model.quantized_from == "built"
