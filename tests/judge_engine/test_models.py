"""Our Llama-family model against transformers on tiny random checkpoints of every supported family."""

from __future__ import annotations

import json
import random

import pytest
import torch
from tiny_models import (  # noqa: F401
    TINY_FAMILIES,
    TINY_VOCAB,
    allocate_kv_caches,
    contiguous_layout,
    embedded_model,
    reference_logits,
    run_chunks,
    save_tiny_checkpoint,
)

from judge_engine.models import ModelConfigError, load_model

torch.set_num_threads(min(2, torch.get_num_threads()))


def _prompts(lengths, seed=0):
    rng = random.Random(seed)
    return [[rng.randrange(3, TINY_VOCAB) for _ in range(n)] for n in lengths]


@pytest.fixture(scope="module", params=sorted(TINY_FAMILIES))
def checkpoint(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    return save_tiny_checkpoint(request.param, folder, seed=len(request.param))


def test_single_prompts_match_transformers(checkpoint):
    model, spec = load_model(checkpoint, torch.float32, "cpu")
    prompts = _prompts([1, 9, 40])
    expected = reference_logits(checkpoint, prompts)
    for prompt, reference in zip(prompts, expected):
        (ours,) = run_chunks(model, spec, [prompt], [[len(prompt)]])
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours, reference, atol=1e-3, rtol=0)


def test_ragged_batch_with_prefix_and_decode_matches_transformers(checkpoint):
    model, spec = load_model(checkpoint, torch.float32, "cpu")
    prompts = _prompts([23, 40, 7], seed=1)
    # step 1: ragged prefill; step 2: continuation behind a cached prefix (one prompt sits out); then decode steps
    chunks = [[15, 5, 1, 1, 1], [16, 0, 22, 1, 1], [4, 1, 1, 1, 0]]
    ours = run_chunks(model, spec, prompts, chunks, block_size=16)
    for mine, reference in zip(ours, reference_logits(checkpoint, prompts)):
        torch.testing.assert_close(mine, reference, atol=1e-3, rtol=0)


def test_output_of_a_prompt_does_not_depend_on_the_batch(checkpoint):
    """Alone, in a batch, whole or behind a cached prefix: the same logits, bit for bit (the CPU path runs every
    product in fixed-shape row tiles, so this holds on any x86-64 CPU)."""
    model, spec = load_model(checkpoint, torch.float32, "cpu")
    prompts = _prompts([12, 30, 5], seed=2)
    together = run_chunks(model, spec, prompts, [[10, 1, 1], [28, 1, 1], [3, 1, 1]], block_size=32)
    alone = run_chunks(model, spec, prompts[1:2], [[28, 1, 1]], block_size=32)
    whole = run_chunks(model, spec, prompts[1:2], [[30]], block_size=32)
    assert torch.equal(together[1], alone[0])
    assert torch.equal(together[1], whole[0])


def test_spec_describes_the_checkpoint(checkpoint):
    _, spec = load_model(checkpoint, torch.float32, "cpu")
    config = json.loads((checkpoint / "config.json").read_text())
    assert spec.architecture == config["architectures"][0]
    assert (spec.num_layers, spec.num_heads, spec.num_kv_heads) == (2, 4, 2)
    assert spec.vocab_size == TINY_VOCAB and spec.eos_token_ids == (2,) and spec.bos_token_id == 1


def test_bfloat16_close_to_transformers_bfloat16(tmp_path):
    folder = save_tiny_checkpoint("qwen3", tmp_path)
    model, spec = load_model(folder, torch.bfloat16, "cpu")
    assert model.embed_tokens.dtype == torch.bfloat16 and model.inv_freq.dtype == torch.float32
    prompts = _prompts([30], seed=3)
    (ours,) = run_chunks(model, spec, prompts, [[20, 10]], dtype=torch.bfloat16)
    (reference,) = reference_logits(folder, prompts, dtype=torch.bfloat16)
    reference32 = reference_logits(folder, prompts)[0]
    # bf16 rounding differs between the two implementations: both must be as close to float32 as each other
    ours_error = (ours - reference32).abs().max()
    reference_error = (reference - reference32).abs().max()
    assert ours_error < 2 * reference_error + 1e-2


def test_sharded_checkpoint_loads(tmp_path):
    import transformers

    folder = save_tiny_checkpoint("llama", tmp_path / "whole")
    sharded = tmp_path / "sharded"
    transformers.AutoModelForCausalLM.from_pretrained(folder).save_pretrained(sharded, max_shard_size="60KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    prompts = _prompts([11])
    whole_model, spec = load_model(folder, torch.float32, "cpu")
    sharded_model, _ = load_model(sharded, torch.float32, "cpu")
    whole_logits = run_chunks(whole_model, spec, prompts, [[11]])[0]
    assert torch.equal(whole_logits, run_chunks(sharded_model, spec, prompts, [[11]])[0])


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"architectures": ["GPT2LMHeadModel"]}, "field 'architectures'"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}}, "rope_type 'yarn'"),
        ({"num_key_value_heads": 3}, "field 'num_key_value_heads'"),
    ],
)
def test_unsupported_configs_fail_clearly(tmp_path, edit, message):
    folder = save_tiny_checkpoint("llama", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config.update(edit)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelConfigError, match=message):
        load_model(folder, torch.float32, "cpu")


def test_missing_tensor_is_reported(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = save_tiny_checkpoint("llama", tmp_path)
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match="model.layers.1.mlp.up_proj.weight"):
        load_model(folder, torch.float32, "cpu")


CHAT = [
    {"role": "system", "content": "You grade answers. Reply yes or no."},
    {"role": "user", "content": "Is 17 a prime number? Answer: yes, it has no divisors but 1 and itself."},
]


@pytest.mark.slow
def test_embedded_model_matches_transformers(embedded_model):
    import transformers

    from judge_engine.loading.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(embedded_model.gguf)
    chat = tokenizer.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    prompts = [tokenizer(text).input_ids for text in (chat, "The capital of France is", chat + "Yes")]
    reference = transformers.AutoModelForCausalLM.from_pretrained(embedded_model.folder, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = [reference(torch.tensor([p])).logits[0] for p in prompts]
    model, spec = load_model(embedded_model.gguf, torch.float32, "cpu")
    (alone,) = run_chunks(model, spec, prompts[:1], [[len(prompts[0])]])
    torch.testing.assert_close(alone, expected[0], atol=1e-3, rtol=0)
    # ragged batch: prefill, a continuation behind the cached prefix, then decode steps
    n0, n1, n2 = (len(p) for p in prompts)
    chunks = [[n0 - 3, 1, 1, 1], [n1 - 2, 0, 1, 1], [n2 - 10, 8, 1, 1]]
    for ours, reference_logits_ in zip(run_chunks(model, spec, prompts, chunks), expected):
        torch.testing.assert_close(ours, reference_logits_, atol=1e-3, rtol=0)
    assert spec.eos_token_ids == (tokenizer.convert_tokens_to_ids("<|im_end|>"),)


def test_fused_and_adopted_weights_agree_with_transformers(tmp_path):
    """A float32 checkpoint's gate/up weights are used in place (two matmuls), a bfloat16 one's are fused while
    converted; Q/K/V are fused either way."""
    import transformers

    folder = save_tiny_checkpoint("qwen2", tmp_path / "f32")
    transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).save_pretrained(tmp_path / "bf16")
    prompts = _prompts([19], seed=4)
    for checkpoint, fused in ((folder, False), (tmp_path / "bf16", True)):
        model, spec = load_model(checkpoint, torch.float32, "cpu")
        assert model.layers[0].self_attn.qkv.fused_weight is not None
        assert (model.layers[1].mlp.gate_up.fused_weight is not None) == fused
        (ours,) = run_chunks(model, spec, prompts, [[12, 7]])
        (expected,) = reference_logits(checkpoint, prompts)
        torch.testing.assert_close(ours, expected, atol=1e-3, rtol=0)


@pytest.mark.parametrize("rows", [[8, 25, 29, 0], [3, 22, 23, 24, 25, 26, 27, 7], [], list(reversed(range(30)))],
                         ids=["some", "runs", "none", "all"])
def test_output_rows_skip_the_last_layer_for_other_rows_without_changing_them(checkpoint, rows):
    """With output_rows the last layer's attention, output projection and MLP run on those rows only
    (none at all for a prefill chunk that needs no logits): their hidden states are the full forward's rows bit
    for bit, and every token's keys and values are still stored."""
    model, spec = load_model(checkpoint, torch.float32, "cpu")
    prompts = _prompts([9, 17, 4], seed=3)
    lengths = [len(p) for p in prompts]
    meta, num_blocks, _ = contiguous_layout(lengths, lengths, 16, shuffle_seed=2)
    ids = torch.tensor([t for p in prompts for t in p])
    positions = torch.tensor([i for n in lengths for i in range(n)])
    # prompts at rows 0-8, 9-25 and 26-29: their last rows out of order, runs of rows inside and across prompts
    rows = torch.tensor(rows, dtype=torch.int64)
    with torch.no_grad():
        full_caches = allocate_kv_caches(spec, num_blocks, 16)
        full = model(ids, positions, meta, full_caches)
        kept_caches = allocate_kv_caches(spec, num_blocks, 16)
        kept = model(ids, positions, meta, kept_caches, rows)
    assert kept.shape == (len(rows), spec.hidden_size)
    assert torch.equal(kept, full[rows])
    for (k_full, v_full), (k_kept, v_kept) in zip(full_caches, kept_caches):
        assert torch.equal(k_full, k_kept) and torch.equal(v_full, v_kept)
