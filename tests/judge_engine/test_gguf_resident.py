"""A .gguf on the CPU keeps its linear maps in the file's block formats: each block reader rebuilds gguf-py's values
to the bit, a block weight multiplies as the float weight it stands for, and a model run this way gives the float32
conversion's logits to the bit, without writing the float32 weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_models import embedded_model, random_blocks, run_chunks, save_tiny_checkpoint, write_tiny_gguf  # noqa: F401

from judge_engine.layers import block_weight, c_kernels, row_tiles
from judge_engine.layers.block_weight import BlockRows, BlockWeight
from judge_engine.loading.gguf_blocks import READERS, read_block_rows
from judge_engine.loading.gguf_resident import WEIGHTS_ENV
from judge_engine.loading.weight_source import GGUFRows
from judge_engine.models import load_model

torch.set_num_threads(min(2, torch.get_num_threads()))

PROMPTS = [[5, 9, 200, 17, 3, 80, 81, 5, 9, 44, 45, 46], [7, 7, 8, 120, 3]]
CHUNKS = [[8, 3, 1], [2, 3, 0]]


def blocks_file(tmp_path, kind: str, rows: int, columns: int, seed: int = 0):
    import gguf

    blocks = random_blocks(kind, rows * columns // READERS[kind].values, np.random.default_rng(seed))
    path = tmp_path / f"{kind}.bin"
    path.write_bytes(b"\x00" * 7 + blocks.tobytes())   # at an odd offset, as a tensor may lie in a file
    expected = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[kind]).reshape(rows, columns)
    return path, expected


def use_route(monkeypatch, route: str) -> None:
    """Rebuild rows with the C kernel (skipped where it cannot be built here) or with torch's operations."""
    if route == "torch":
        monkeypatch.setattr(block_weight, "kernel", lambda: c_kernels.Kernel(None, "off for this test"))
    elif block_weight.kernel().function is None:
        pytest.skip(f"the block kernel is unavailable here: {block_weight.kernel().reason}")


@pytest.mark.parametrize("route", ["kernel", "torch"])
@pytest.mark.parametrize("kind", sorted(READERS))
def test_each_block_reader_rebuilds_gguf_py_values_to_the_bit(tmp_path, kind, route, monkeypatch):
    from judge_engine.loading import gguf_blocks

    use_route(monkeypatch, route)
    monkeypatch.setattr(gguf_blocks, "SLAB_BLOCKS", 5)   # slabs that end inside a row
    rows, columns = 6, 512
    path, expected = blocks_file(tmp_path, kind, rows, columns)
    block_rows = read_block_rows(str(path), 7, kind, rows, columns)
    weight = BlockWeight([block_rows])
    rebuilt = weight.rows(0, rows).numpy()
    assert rebuilt.dtype == np.float32 and rebuilt.shape == (rows, columns)
    # bit patterns, so that a -0.0 where gguf-py gives +0.0 (or back) fails too
    assert np.array_equal(rebuilt.view(np.uint32), expected.view(np.uint32))
    assert np.array_equal(weight.rows(2, 5).numpy().view(np.uint32), expected[2:5].view(np.uint32))
    if READERS[kind].half:
        assert block_rows.codes.numel() == rows * columns // 2   # 4-bit codes two to a byte
    assert weight.nbytes() < rows * columns * 4 / 2


def test_a_format_without_a_reader_is_none_and_a_cut_file_is_an_error(tmp_path):
    path, _ = blocks_file(tmp_path, "Q8_0", 2, 64)
    assert read_block_rows(str(path), 7, "Q2_K", 2, 256) is None
    with pytest.raises(ValueError, match="ends inside a Q8_0 tensor"):
        read_block_rows(str(path), 7, "Q8_0", 4, 64)


def test_the_kernel_is_built_where_the_cpu_has_avx2_and_a_c_compiler_is_found(monkeypatch):
    from judge_engine.loading.cpu_info import host_cpu

    if "avx2" not in host_cpu().flags or c_kernels.compiler() is None:
        pytest.skip("no AVX2 or no C compiler here: the kernel is rightly unavailable")
    assert block_weight.kernel().function is not None, block_weight.kernel().reason
    monkeypatch.setenv(block_weight.KERNEL_ENV, "off")
    block_weight.kernel.cache_clear()
    try:
        assert block_weight.kernel().function is None and "JUDGE_ENGINE_BLOCK_KERNEL=off" in block_weight.kernel().reason
    finally:
        block_weight.kernel.cache_clear()


@pytest.mark.parametrize("route", ["kernel", "torch"])
@pytest.mark.parametrize("count", [1, 31, 33, 70])
def test_a_block_weight_multiplies_as_its_float_weight_chunk_by_chunk(tmp_path, count, route, monkeypatch):
    use_route(monkeypatch, route)
    monkeypatch.setattr(row_tiles, "COLUMN_CHUNK_BYTES", 64 * 256 * 4)    # 64-row chunks: 5 of them, the last short
    q4, _ = blocks_file(tmp_path, "Q4_K", 200, 256)
    q6, _ = blocks_file(tmp_path, "Q6_K", 100, 256, seed=1)
    weight = BlockWeight([read_block_rows(str(q4), 7, "Q4_K", 200, 256), read_block_rows(str(q6), 7, "Q6_K", 100, 256)])
    dense = weight.rows(0, 300)
    x, bias = torch.randn(count, 256), torch.randn(300)
    assert torch.equal(row_tiles.linear(x, weight, bias), row_tiles.linear(x, dense, bias))
    assert torch.equal(weight(x), row_tiles.linear(x, dense))
    assert torch.equal(weight.rows(150, 260), dense[150:260])   # a range across the two parts


@pytest.mark.parametrize("route", ["kernel", "torch"])
def test_rows_rebuilt_under_inference_mode_and_then_outside_it_both_come_back(tmp_path, route, monkeypatch):
    """The reused scratch buffer is one per inference mode: a buffer made under inference_mode (an engine step) is an
    inference tensor, and writing the next chunk into it outside that mode (a model run by hand) would raise."""
    use_route(monkeypatch, route)
    q4, expected = blocks_file(tmp_path, "Q4_K", 40, 256)
    weight = BlockWeight([read_block_rows(str(q4), 7, "Q4_K", 40, 256)])
    with torch.inference_mode():
        inside = weight.rows(0, 40, reuse=True).clone()
    outside = weight.rows(0, 40, reuse=True)
    assert np.array_equal(inside.numpy(), expected) and np.array_equal(outside.numpy(), expected)


def tiny_gguf(tmp_path, family: str, quant: str, **overrides):
    hf = save_tiny_checkpoint(family, tmp_path / "hf", **overrides)
    path = tmp_path / f"tiny-{quant}.gguf"
    write_tiny_gguf(hf, path, quant)
    return path


@pytest.mark.parametrize("family,quant,overrides", [
    ("llama", "Q4_0", {"intermediate_size": 128}),
    ("qwen2", "Q8_0", {"intermediate_size": 128}),
    ("qwen3", "Q5_1", {"intermediate_size": 128}),
    ("llama", "F16", {"intermediate_size": 128}),   # no block reader: each map held dequantized, as a float32 part
    # the default judge's mix (Q4_K with V and down maps in Q6_K), in a model 256 wide: a fused QKV map whose
    # parts come in two formats, permuted Q/K rows, gate and up run apart as the float model runs them
    ("llama", "Q4_K_M", {"hidden_size": 256, "intermediate_size": 256, "head_dim": 64}),
    ("qwen2", "Q4_K_M", {"hidden_size": 256, "intermediate_size": 256}),
])
def test_a_gguf_model_keeps_its_blocks_and_gives_the_float32_logits_to_the_bit(tmp_path, monkeypatch, family, quant,
                                                                              overrides):
    gguf_path = tiny_gguf(tmp_path, family, quant, **overrides)
    monkeypatch.setenv(WEIGHTS_ENV, "float32")
    reference, spec = load_model(gguf_path, torch.float32, "cpu", cache_dir=tmp_path / "float32")
    expected = run_chunks(reference, spec, PROMPTS, CHUNKS)
    monkeypatch.delenv(WEIGHTS_ENV)
    model, _ = load_model(gguf_path, torch.float32, "cpu", cache_dir=tmp_path / "blocks")
    [folder] = (tmp_path / "blocks" / "converted").glob("*-v*")
    assert not (folder / "model.safetensors").exists()    # no float32 copy on disk
    assert isinstance(model.embed_tokens, GGUFRows)
    weights = [m for m in model.modules() if isinstance(m, BlockWeight)]   # per layer QKV, O, gate, up, down
    assert all(isinstance(part, BlockRows) == (quant != "F16") for w in weights for part in w.parts)
    assert len(weights) == 2 * 5 + 1 and not any(p.dtype == torch.float32 and p.dim() == 2 for p in model.parameters())
    for got, want in zip(run_chunks(model, spec, PROMPTS, CHUNKS), expected):
        assert torch.equal(got, want)


def test_a_bfloat16_model_in_its_blocks_gives_the_bfloat16_logits_of_the_float32_copy(tmp_path, monkeypatch):
    """bfloat16 (the CPU's choice where it has AMX): each rebuilt chunk rounded as the float32 copy is on loading,
    the merged maps fused as that copy fuses them."""
    gguf_path = tiny_gguf(tmp_path, "qwen2", "Q4_K_M", hidden_size=256, intermediate_size=256)
    monkeypatch.setenv(WEIGHTS_ENV, "float32")
    reference, spec = load_model(gguf_path, torch.bfloat16, "cpu", cache_dir=tmp_path / "float32")
    expected = run_chunks(reference, spec, PROMPTS, CHUNKS, dtype=torch.bfloat16)
    monkeypatch.delenv(WEIGHTS_ENV)
    model, _ = load_model(gguf_path, torch.bfloat16, "cpu", cache_dir=tmp_path / "blocks")
    assert any(isinstance(m, BlockWeight) for m in model.modules())
    for got, want in zip(run_chunks(model, spec, PROMPTS, CHUNKS, dtype=torch.bfloat16), expected):
        assert torch.equal(got, want)


def test_the_environment_chooses_the_float32_copy_and_refuses_a_wrong_value(tmp_path, monkeypatch):
    gguf_path = tiny_gguf(tmp_path, "qwen2", "Q8_0", intermediate_size=128)
    monkeypatch.setenv(WEIGHTS_ENV, "float32")
    model, _ = load_model(gguf_path, torch.float32, "cpu", cache_dir=tmp_path / "c")
    assert not any(isinstance(m, BlockWeight) for m in model.modules())
    [folder] = (tmp_path / "c" / "converted").glob("*-v*")
    assert (folder / "model.safetensors").is_file()
    monkeypatch.setenv(WEIGHTS_ENV, "float16")
    with pytest.raises(ValueError, match="JUDGE_ENGINE_GGUF_WEIGHTS='float16': expected one of blocks, float32"):
        load_model(gguf_path, torch.float32, "cpu", cache_dir=tmp_path / "c")


@pytest.mark.slow
def test_the_embedded_model_in_its_blocks_gives_the_float32_logits_to_the_bit(embedded_model, monkeypatch):
    prompt = [list(range(100, 260))]
    model, spec = load_model(embedded_model.gguf, torch.float32, "cpu")
    assert any(isinstance(m, BlockWeight) for m in model.modules())
    got = run_chunks(model, spec, prompt, [[150, 10]])[0]
    monkeypatch.setenv(WEIGHTS_ENV, "float32")
    reference, _ = load_model(embedded_model.gguf, torch.float32, "cpu")
    assert torch.equal(got, run_chunks(reference, spec, prompt, [[150, 10]])[0])
