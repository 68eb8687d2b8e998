"""A method's prompts -> token ids for the embedded engine, segment by segment.

prompt = instructions (shared by all) + context (shared by the items of one trajectory) + item segment, each
segment encoded as one string and split where the tokenizer would split the whole chat anyway, so that the ids
are those of prompts.chat_messages as an OpenAI-compatible server tokenizes them (uncut prompts).
A trajectory's context is encoded once per method prompt and truncated once, to the room its longest item
leaves, so every item of the trajectory keeps the same prefix. A content-free context is the same for all
trajectories with the same task, reference and evidence names, so its prompts repeat exactly and are scored once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubrics.judges.prompt import prompts
from rubrics.judges.methods import PromptSpec
from rubrics.judges.prompt.prompts import Piece
from rubrics.judges.protocol import JudgeContext
from rubrics.judges.prompt.token_layout import CUT_MARKER_TOKENS, MIN_EVIDENCE_TOKENS, ChatLayout, encode_context, \
    encode_piece, encode_text, encode_trusted, encode_untrusted


@dataclass(frozen=True)
class PromptRequest:
    """One prompt to build: a method's PromptSpec in one trajectory's context."""
    context: JudgeContext
    spec: PromptSpec


@dataclass(frozen=True)
class BuiltPrompt:
    prefix: list[int]  # instructions + context: token-identical for the items of one trajectory
    item: list[int]  # the item segment, ending with the assistant header (and the method's lead-in)
    choices: list[list[int]]  # the continuations whose log-probabilities are read
    cut_tokens: int = 0  # evidence tokens cut to fit the context

    @property
    def ids(self) -> list[int]:
        return self.prefix + self.item


@dataclass(frozen=True)
class PromptError:
    message: str


class PromptBuilder:
    def __init__(self, tokenizer: Any, max_model_len: int):
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.layout = ChatLayout.from_tokenizer(tokenizer)
        self._instructions: dict[str, list[int]] = {}

    def instructions(self, text: str) -> list[int]:
        if text not in self._instructions:
            ids = encode_trusted(self.tokenizer, text)
            self._instructions[text] = self.layout.system_open + ids + self.layout.system_to_user
        return self._instructions[text]

    def encode(self, pieces: Sequence[Piece]) -> list[int]:
        """A segment's pieces as one string (token_layout.encode_text): the ids a server gets for the same text."""
        return encode_text(self.tokenizer, list(pieces))

    def item_segment(self, spec: PromptSpec) -> list[int]:
        ids = self.encode(spec.item) + self.layout.user_to_assistant
        return ids + encode_trusted(self.tokenizer, spec.lead_in) if spec.lead_in else ids

    def choices(self, spec: PromptSpec) -> list[list[int]]:
        return [encode_piece(self.tokenizer, choice) for choice in spec.choices]

    def follow_up(self, rationale: str, question: str) -> list[int]:
        """Appended after the item segment in reasoned mode: the rationale, then the method's question."""
        layout = self.layout
        return (encode_untrusted(self.tokenizer, rationale.strip()) + layout.assistant_to_user
                + encode_trusted(self.tokenizer, question) + layout.user_to_assistant)

    def reserve(self, spec: PromptSpec, choices: list[list[int]]) -> int:
        """Tokens needed after the item segment: the longest choice, and the rationale turn in reasoned mode."""
        extra = max(map(len, choices)) + 1
        if spec.reasoning is not None:
            extra += spec.reasoning.max_tokens + len(self.follow_up("", spec.reasoning.follow_up)) + 2
        return extra

    def build(self, wanted: Sequence[PromptRequest]) -> list[BuiltPrompt | PromptError]:
        out: list[BuiltPrompt | PromptError | None] = [None] * len(wanted)
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(wanted):
            key = (request.context, request.spec.instructions, request.spec.content_free)
            groups.setdefault(key, []).append(index)
        for (context, instructions, content_free), indexes in groups.items():
            self._build_group(context, instructions, content_free, [wanted[i].spec for i in indexes], indexes, out)
        return out  # type: ignore[return-value]

    def _build_group(self, context: JudgeContext, instructions_text: str, content_free: bool,
                     specs: list[PromptSpec], indexes: list[int], out: list) -> None:
        instructions = self.instructions(instructions_text)
        pieces = prompts.context_pieces(context, content_free=content_free)
        items = [self.item_segment(spec) for spec in specs]
        choices = [self.choices(spec) for spec in specs]
        # piece by piece, as a cut context is encoded
        fixed_context = [t for p in pieces if not p.cuttable for t in encode_piece(self.tokenizer, p)]
        rooms = [self.max_model_len - len(instructions) - len(item) - self.reserve(spec, spec_choices)
                 for spec, item, spec_choices in zip(specs, items, choices)]
        # Items whose own segment leaves no room for a minimal context are errors; the rest share one context.
        # (The minimum: the fixed pieces plus a few tokens and a cut marker per evidence block.)
        blocks = sum(1 for p in pieces if p.cuttable)
        minimum = len(fixed_context) + blocks * (MIN_EVIDENCE_TOKENS + CUT_MARKER_TOKENS)
        fitting = [room for room in rooms if room >= minimum]
        encoded = encode_context(self.tokenizer, pieces, min(fitting)) if fitting else None
        for index, spec, item, spec_choices, room in zip(indexes, specs, items, choices, rooms):
            if encoded is None or room < minimum:
                needed = len(instructions) + len(item) + self.reserve(spec, spec_choices) + len(fixed_context)
                out[index] = PromptError(
                    f"prompt cannot fit the model's context of {self.max_model_len} tokens: the instructions, task,"
                    f" reference and item need {needed} tokens, and at least "
                    f"{MIN_EVIDENCE_TOKENS} more per evidence block")
                continue
            out[index] = BuiltPrompt(instructions + encoded.ids, item, spec_choices, encoded.cut_tokens)
