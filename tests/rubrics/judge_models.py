"""Shared by the judge tests: the embedded model's real tokenizer (and chat template), and a tiny random
Llama over that same vocabulary, so the judge's engine path runs in seconds with the real special tokens."""
from __future__ import annotations

import functools
from pathlib import Path

# Imported now, at collection: once tests/ itself is on sys.path (tests/test_*.py at its top level put it
# there), a lazy `import judge_engine` would find the folder tests/judge_engine/ as a namespace package.
import judge_engine.llm  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
CFO_DIR = REPO / "examples" / "cfo-mis"
CFO_RUBRIC = CFO_DIR / "rubric.yaml"
INVOICE_DIR = REPO / "examples" / "invoice-fix"
INVOICE_RUBRIC = INVOICE_DIR / "rubric.yaml"
LABELS_DIR = REPO / "examples" / "labels"


@functools.lru_cache(maxsize=1)
def embedded_tokenizer():
    """SmolLM2-135M-Instruct's tokenizer (fetches and converts the embedded model on first use)."""
    from judge_engine.loading.tokenizer import load_tokenizer
    from judge_engine.loading.weights import resolve_model_path

    return load_tokenizer(resolve_model_path(None))


@functools.lru_cache(maxsize=None)
def tiny_judge_model(root: str, max_positions: int = 4096) -> Path:
    """A 2-layer random Llama with the embedded tokenizer's vocabulary and chat template."""
    import torch
    import transformers

    folder = Path(root) / f"tiny-judge-{max_positions}"
    tokenizer = embedded_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
        rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # a wider spread than the default init, so log-probabilities differ between prompts
        for name, param in model.named_parameters():
            param.copy_(1.0 + 0.1 * torch.randn_like(param) if "norm" in name else 0.1 * torch.randn_like(param))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def cfo_trajectory_paths() -> list[Path]:
    return sorted((CFO_DIR / "trajectories").glob("*.json"))


def cfo_items_asked(path: Path) -> int:
    """The judge items of the example a judge is asked about on this trajectory: its five, less those a missing
    fact decides (examples/cfo-mis/expected.json)."""
    import json

    expected = json.loads((CFO_DIR / "expected.json").read_text())["trajectories"][path.name]
    return 5 - len(expected["facts_missing"])


def copied_labels(folder: Path, keep) -> tuple[list[str], list[str]]:
    """Labels of support-refunds and travel-booking copied into folder (trajectory paths made absolute, the domain
    named, only the rows keep(rows) returns): the labels files and the --rubric arguments for them."""
    import json

    files, rubrics = [], []
    for domain in ("support-refunds", "travel-booking"):
        rows = keep([json.loads(line) for line in (LABELS_DIR / domain / "labels.jsonl").read_text().splitlines()])
        for row in rows:
            row["trajectory"] = str(LABELS_DIR / domain / row["trajectory"])
            row["domain"] = domain
        path = Path(folder) / f"{domain}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        files.append(str(path))
        rubrics += ["--rubric", str(LABELS_DIR / domain / "rubric.yaml")]
    return files, rubrics
