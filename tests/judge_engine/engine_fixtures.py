"""Shared by the engine tests: a tiny random checkpoint with a tiny byte-level tokenizer, a transformers
reference over the same weights, and small helpers. Import with ``from engine_fixtures import ...``."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch

from tiny_models import TINY_VOCAB, save_tiny_checkpoint

torch.set_num_threads(1)  # the machine is shared: one thread avoids oversubscription stalls

_TRAINING_TEXT = [
    "The quick brown fox jumps over the lazy dog. Judges grade answers against rubrics.",
    "Did the agent email the CFO? Answer yes or no. The total travel spend is 48.2L.",
    "Paged attention keeps keys and values in fixed-size blocks; prefixes are shared.",
]


def save_tiny_tokenizer(folder: Path) -> None:
    """A byte-level BPE tokenizer whose ids fit the tiny vocabulary (specials 0-2 match the tiny config)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TINY_VOCAB, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(_TRAINING_TEXT * 20, trainer)
    assert tokenizer.get_vocab_size() <= TINY_VOCAB
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                      pad_token="<pad>")
    wrapped.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    wrapped.save_pretrained(folder)


@functools.lru_cache(maxsize=None)
def _tiny_model_dir(root: str, family: str) -> Path:
    folder = Path(root) / f"tiny-{family}"
    save_tiny_checkpoint(family, folder)
    save_tiny_tokenizer(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return _tiny_model_dir(str(tmp_path_factory.getbasetemp()), "llama")


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory) -> Path:
    return _tiny_model_dir(str(tmp_path_factory.getbasetemp()), "qwen2")


@pytest.fixture(scope="session")
def tiny_gemma2(tmp_path_factory) -> Path:
    return _tiny_model_dir(str(tmp_path_factory.getbasetemp()), "gemma2")


@pytest.fixture(scope="session")
def tiny_phi3(tmp_path_factory) -> Path:
    return _tiny_model_dir(str(tmp_path_factory.getbasetemp()), "phi3")


@functools.lru_cache(maxsize=4)
def hf_model(folder: str, dtype: torch.dtype = torch.float32):
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()


def hf_logits(folder: Path, token_ids: list[int], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """transformers' float32 logits [len, V] for one sequence."""
    with torch.no_grad():
        return hf_model(str(folder), dtype)(torch.tensor([token_ids])).logits[0].float()


def hf_greedy(folder: Path, token_ids: list[int], max_new_tokens: int) -> list[int]:
    """transformers' greedy continuation (new tokens only), never stopping early at EOS."""
    model = hf_model(str(folder))
    with torch.no_grad():
        out = model.generate(torch.tensor([token_ids]), attention_mask=torch.ones(1, len(token_ids), dtype=torch.long),
                             max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=0)
    return out[0, len(token_ids):].tolist()


def max_logit_error(folder: Path, out) -> float:
    """Largest |logit difference| between an output's returned logits and transformers' over the same tokens."""
    reference = hf_logits(folder, out.prompt_token_ids + out.token_ids)
    assert out.logits is not None and len(out.logits_positions) == len(out.logits)
    return (out.logits - reference[out.logits_positions]).abs().max().item()


def random_prompt(seed: int, length: int, vocab: int = TINY_VOCAB) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (length,), generator=generator).tolist()


def tiny_llm(folder: Path, *, blocks: int = 256, block_size: int = 4, **options):
    """An LLM over a tiny checkpoint with a cache of `blocks` blocks (tiny blocks, so that tables are long)."""
    from judge_engine import LLM
    from judge_engine.engine.kv_cache import bytes_per_block

    spec = _tiny_spec(folder)
    # float32 unless a test asks: the engine's own default is timed at start-up on CPUs with bfloat16
    # instructions, and a test's figures must not depend on which CPU, or how loaded, runs it
    options = {"dtype": "float32", **options}
    return LLM(str(folder), block_size=block_size,
               kv_cache_bytes=blocks * bytes_per_block(spec, block_size, _dtype(options)), **options)


def _dtype(options) -> torch.dtype:
    return torch.bfloat16 if options.get("dtype") == "bfloat16" else torch.float32


@functools.lru_cache(maxsize=None)
def _tiny_spec(folder: Path):
    from judge_engine.models.config import read_config_json
    from judge_engine.loading.loader import ModelSpec
    from judge_engine.models.registry import family_for

    raw, source = read_config_json(folder)
    family, architecture = family_for(raw.get("architectures") or [], source)
    return ModelSpec.from_config(family.load_config_class().from_folder(folder, architecture))
