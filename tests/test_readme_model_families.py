"""The judges guide's sentence on which local models `--model` takes (docs/guide/judges.md, "How good is the
embedded judge?") says what the engine's model registry runs: every registered architecture, and exactly the GGUF
architectures it reads (judge_engine/models/registry.py)."""
from __future__ import annotations

import re
from pathlib import Path

from judge_engine.models.registry import FAMILIES, supported_architectures

REPO = Path(__file__).resolve().parents[1]
PAGE = (REPO / "docs" / "guide" / "judges.md").read_text(encoding="utf-8")
USER_PAGES = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]   # wherever a family is named
NAMES = {"LlamaForCausalLM": "Llama", "MistralForCausalLM": "Mistral", "Qwen2ForCausalLM": "Qwen2",
         "Qwen3ForCausalLM": "Qwen3", "Gemma2ForCausalLM": "Gemma 2", "Phi3ForCausalLM": "Phi-3"}


def sentence() -> str:
    match = re.search(r"`--model`\s+with a bigger local model \((.*?)\), with a calibration", PAGE, re.DOTALL)
    assert match, "the judges guide's --model sentence moved; keep this test on it"
    return " ".join(match.group(1).split())


def test_the_guide_names_every_family_the_registry_runs():
    text = sentence()
    assert set(supported_architectures()) == set(NAMES), "a new family: name it in docs/guide/judges.md and here"
    folder, gguf = text.split("`.gguf`", 1)
    for architecture, name in NAMES.items():
        assert re.search(rf"\b{re.escape(name)}\b", folder), name
    for page in USER_PAGES:
        assert "of the Llama family" not in page.read_text(encoding="utf-8"), page.name


def test_the_guide_names_exactly_the_gguf_architectures_the_registry_reads():
    text = sentence()
    gguf = text.split("`.gguf`", 1)[1]
    read = {layout.gguf_architecture for family in FAMILIES for layout in family.gguf}
    named = set(re.findall(r"`([a-z0-9]+)`", gguf))
    assert named == read
    without = {NAMES[a] for family in FAMILIES if not family.gguf for a in family.architectures}
    assert without and all(name in gguf.split(":", 1)[1] for name in without)   # said to need an HF folder
