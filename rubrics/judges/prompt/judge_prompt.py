"""The prompt of one judge request, from its method to the engine and back.

A method names the prompts it needs scored (PromptSpec: what it writes). The embedded judge makes one JudgePrompt
per request from the request and those specs, and that one object goes the whole way: PromptBuilder.build fills in
each spec's token ids (or the error that stops it), reasoned mode adds the rationales it drew, the engine's scores
are put on it, and the method turns them into the verdict. The token ids follow the prefix-preserving rules of
rubrics/judges/prompt/token_layout.py. Both the methods and the prompt builder import from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rubrics.judges.prompt.prompts import Piece
from rubrics.judges.usage import JudgeUsage


@dataclass(frozen=True)
class Reasoning:
    """Generate a rationale after the item segment, then ask follow_up before scoring the choices."""
    max_tokens: int
    follow_up: str

    def turns_after(self, rationale: str) -> list[dict[str, str]]:
        """The chat turns between the rationale and the scored answer: the rationale, then the question."""
        return [{"role": "assistant", "content": rationale}, {"role": "user", "content": self.follow_up}]


@dataclass(frozen=True)
class PromptSpec:
    """One prompt a method needs scored: system instructions, then the trajectory's context, then `item` (the
    rest of the user turn), then the assistant turn opened with `lead_in`; `choices` are the continuations of
    the assistant turn whose log-probabilities are read."""
    instructions: str
    item: tuple[Piece, ...]
    choices: tuple[Piece, ...]
    lead_in: str = ""
    content_free: bool = False   # every evidence block replaced by "N/A" (a baseline for the same item)
    reasoning: Reasoning | None = None
    # the model layers whose hidden states at the answer position (the prompt's last token) the method reads
    hidden_layers: tuple[int, ...] = ()


@dataclass(eq=False)
class JudgePrompt:
    """One request's prompts (its method's specs, in the method's order: content-free baselines before the main
    one), filled in stage by stage. The per-spec lists (prefixes, items, choices, and each row of scores) run
    parallel to specs."""
    request: Any                  # a JudgeRequest, or a ComparisonRequest
    specs: list[PromptSpec]
    method: Any = None            # the JudgeMethod that wrote the specs and reads the scores (None: a comparison)
    error: str | None = None      # why the request cannot be judged (set at any stage; nothing later runs)
    # built (PromptBuilder.build)
    prefixes: list[list[int]] = field(default_factory=list)   # instructions + context: shared by one context's items
    items: list[list[int]] = field(default_factory=list)      # the item segment, to the assistant header and lead-in
    choices: list[list[list[int]]] = field(default_factory=list)   # the continuations whose log-probabilities count
    cut_tokens: int = 0           # evidence tokens cut to fit the model's context
    # reasoned mode: every rationale drawn (one greedy one, or `samples` of them)
    rationales: list[str] = field(default_factory=list)
    # scored: one row per rationale (one row outside reasoned mode), one engine result per spec (Scored, or a str)
    scores: list[list[Any]] = field(default_factory=list)
    usage: JudgeUsage = field(default_factory=JudgeUsage)   # the model work this request was first to ask for

    @property
    def context(self) -> Any:
        return self.request.context

    def ids(self, index: int = -1) -> list[int]:
        """Spec index's prompt token ids (default: the main prompt, over the trajectory's own evidence)."""
        return self.prefixes[index] + self.items[index]

    @property
    def rationale(self) -> str | None:
        """The rationale shown with the verdict: the first one drawn."""
        return self.rationales[0] if self.rationales else None

    @property
    def reasoning(self) -> Reasoning | None:
        return self.specs[-1].reasoning if self.specs else None
