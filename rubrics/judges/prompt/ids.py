"""A request's prompts -> token ids for the embedded engine, segment by segment (PromptBuilder.build fills in each
JudgePrompt). The segments and the rules that keep a trajectory's prefix token-identical across its items are
written once, in rubrics/judges/prompt/token_layout.py ("Prefix-preserving tokenization rules"); this module
applies them (rules 1 to 5 are marked where they are applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubrics.judges.prompt import prompts
from rubrics.judges.prompt.judge_prompt import JudgePrompt, PromptSpec
from rubrics.judges.prompt.prompts import Piece
from rubrics.judges.protocol import JudgeContext
from rubrics.judges.prompt.token_layout import CUT_MARKER_TOKENS, MIN_EVIDENCE_TOKENS, chat_layout, encode_context, \
    encode_piece, encode_text, encode_trusted, encode_untrusted


class PromptBuilder:
    def __init__(self, tokenizer: Any, max_model_len: int):
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        # the chat template's pieces around the turns (token_layout.chat_layout)
        self.system_open, self.system_to_user, self.user_to_assistant, self.assistant_to_user = \
            chat_layout(tokenizer)
        self._instructions: dict[str, list[int]] = {}

    def instructions(self, text: str) -> list[int]:
        """The instructions segment: its ids depend on the instructions text alone (rule 2)."""
        if text not in self._instructions:
            ids = encode_trusted(self.tokenizer, text)
            self._instructions[text] = self.system_open + ids + self.system_to_user
        return self._instructions[text]

    def encode(self, pieces: Sequence[Piece]) -> list[int]:
        """A segment's pieces as one string (token_layout.encode_text): the ids a server gets for the same text."""
        return encode_text(self.tokenizer, list(pieces))

    def item_segment(self, spec: PromptSpec) -> list[int]:
        ids = self.encode(spec.item) + self.user_to_assistant
        return ids + encode_trusted(self.tokenizer, spec.lead_in) if spec.lead_in else ids

    def choices(self, spec: PromptSpec) -> list[list[int]]:
        return [encode_piece(self.tokenizer, choice) for choice in spec.choices]

    def follow_up(self, rationale: str, question: str) -> list[int]:
        """Appended after the item segment in reasoned mode: the rationale, then the method's question."""
        return (encode_untrusted(self.tokenizer, rationale.strip()) + self.assistant_to_user
                + encode_trusted(self.tokenizer, question) + self.user_to_assistant)

    def reserve(self, spec: PromptSpec, choices: list[list[int]]) -> int:
        """Tokens needed after the item segment: the longest choice, and the rationale turn in reasoned mode."""
        extra = max(map(len, choices)) + 1
        if spec.reasoning is not None:
            extra += spec.reasoning.max_tokens + len(self.follow_up("", spec.reasoning.follow_up)) + 2
        return extra

    def build(self, wanted: Sequence[JudgePrompt]) -> None:
        """Fill in each prompt's token ids, spec by spec (or its error: the first spec that cannot fit). Specs with
        the same context, instructions and content-free flag are built together, over one context (rules 3, 5)."""
        slots = [(prompt, index) for prompt in wanted for index in range(len(prompt.specs))]
        built: list[Any] = [None] * len(slots)   # per slot: (prefix, item, choices, cut tokens), or an error
        groups: dict[tuple, list[int]] = {}
        for slot, (prompt, index) in enumerate(slots):
            spec = prompt.specs[index]
            groups.setdefault((prompt.context, spec.instructions, spec.content_free), []).append(slot)
        for (context, instructions, content_free), members in groups.items():
            self._build_group(context, instructions, content_free,
                              [slots[m][0].specs[slots[m][1]] for m in members], members, built)
        for prompt in wanted:
            empty = [[] for _ in prompt.specs]
            prompt.prefixes, prompt.items, prompt.choices = list(empty), list(empty), list(empty)
        for (prompt, index), result in zip(slots, built):
            if isinstance(result, str):
                prompt.error = prompt.error or result
            else:
                prompt.prefixes[index], prompt.items[index], prompt.choices[index], cut = result
                prompt.cut_tokens += cut

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
        # rule 3: the context encoded once for the group, cut once to the room its tightest item leaves
        encoded = encode_context(self.tokenizer, pieces, min(fitting)) if fitting else None
        for index, spec, item, spec_choices, room in zip(indexes, specs, items, choices, rooms):
            if encoded is None or room < minimum:
                needed = len(instructions) + len(item) + self.reserve(spec, spec_choices) + len(fixed_context)
                out[index] = (
                    f"prompt cannot fit the model's context of {self.max_model_len} tokens: the instructions, task,"
                    f" reference and item need {needed} tokens, and at least "
                    f"{MIN_EVIDENCE_TOKENS} more per evidence block")
                continue
            context_ids, cut_tokens = encoded
            out[index] = (instructions + context_ids, item, spec_choices, cut_tokens)   # rule 1: concatenated
