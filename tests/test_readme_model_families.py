"""The README's sentence on which local models `--model` takes says what the engine's model registry runs: every
registered architecture, and exactly the GGUF architectures it reads (judge_engine/models/registry.py)."""
from __future__ import annotations

import re
from pathlib import Path

from judge_engine.models.registry import FAMILIES, supported_architectures

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
NAMES = {"LlamaForCausalLM": "Llama", "MistralForCausalLM": "Mistral", "Qwen2ForCausalLM": "Qwen2",
         "Qwen3ForCausalLM": "Qwen3", "Gemma2ForCausalLM": "Gemma 2", "Phi3ForCausalLM": "Phi-3"}


def sentence() -> str:
    match = re.search(r"`--model`\s+with a bigger local model \((.*?)\), with a calibration", README, re.DOTALL)
    assert match, "the README's --model sentence moved; keep this test on it"
    return " ".join(match.group(1).split())


def test_the_readme_names_every_family_the_registry_runs():
    text = sentence()
    assert set(supported_architectures()) == set(NAMES), "a new family: name it in the README and here"
    folder, gguf = text.split("`.gguf`", 1)
    for architecture, name in NAMES.items():
        assert re.search(rf"\b{re.escape(name)}\b", folder), name
    assert "of the Llama family" not in README


def test_the_readme_names_exactly_the_gguf_architectures_the_registry_reads():
    text = sentence()
    gguf = text.split("`.gguf`", 1)[1]
    read = {layout.gguf_architecture for family in FAMILIES for layout in family.gguf}
    named = set(re.findall(r"`([a-z0-9]+)`", gguf))
    assert named == read
    without = {NAMES[a] for family in FAMILIES if not family.gguf for a in family.architectures}
    assert without and all(name in gguf.split(":", 1)[1] for name in without)   # said to need an HF folder
