"""The tokenizer of a model: a fast transformers tokenizer that carries the chat template."""

from __future__ import annotations

from pathlib import Path


def load_tokenizer(path: str | Path, cache_dir: str | Path | None = None):
    """Tokenizer of an HF folder, or of a .gguf file (read from its converted folder under ``cache_dir``, the one
    the weights were converted into; None: the engine's cache)."""
    from judge_engine.loading.loader import model_folder

    folder = model_folder(path, cache_dir, float_weights=False)
    try:
        if (folder / "tokenizer.json").is_file():
            # The generic fast class reads tokenizer.json directly; AutoTokenizer would first index every
            # model package of transformers, which costs seconds at each start-up.
            from transformers import PreTrainedTokenizerFast

            tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
        else:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as error:
        raise FileNotFoundError(f"{folder}: no usable tokenizer files ({error})") from error
    if not tokenizer.is_fast:
        raise ValueError(f"{folder}: only a slow tokenizer could be loaded; judge_engine needs a fast one")
    return tokenizer
