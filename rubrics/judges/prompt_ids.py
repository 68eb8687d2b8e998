"""Judge requests -> token-id prompts for the embedded engine, segment by segment.

prompt = instructions (shared by all) + context (shared by the items of one trajectory) + item segment, each
segment encoded as one string and split where the tokenizer would split the whole chat anyway, so that the ids
are those of prompts.chat_messages as an OpenAI-compatible server tokenizes them (uncut prompts).
The context of a trajectory is encoded once and truncated once, to the room its longest item leaves, so every
item of the trajectory keeps the same prefix; the likelihood method's content-free context is the same for all
trajectories with the same task, reference and evidence names, so its prompts repeat exactly and are scored once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rubrics.judges import prompts
from rubrics.judges.prompts import CHOICE, LIKELIHOOD, Piece
from rubrics.judges.protocol import JudgeRequest
from rubrics.judges.token_layout import CUT_MARKER_TOKENS, MIN_EVIDENCE_TOKENS, ChatLayout, encode_context, encode_piece, \
    encode_text, encode_trusted, encode_untrusted


@dataclass(frozen=True)
class BuiltPrompt:
    method: str
    prefix: list[int]  # instructions + context: token-identical for the items of one trajectory
    item: list[int]  # the item segment, ending with the assistant header (and the lead-in for likelihood)
    choices: list[list[int]]  # choice: [met answer, unmet answer]; likelihood: [statement]
    baseline: list[int] | None = None  # likelihood: the same prompt over content-free evidence
    cut_tokens: int = 0  # evidence tokens cut to fit the context

    @property
    def ids(self) -> list[int]:
        return self.prefix + self.item


@dataclass(frozen=True)
class PromptError:
    message: str


class PromptBuilder:
    def __init__(self, tokenizer: Any, max_model_len: int, default_method: str = CHOICE):
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.default_method = default_method
        self.layout = ChatLayout.from_tokenizer(tokenizer)
        self.answer_ids = [encode_trusted(tokenizer, answer) for answer in prompts.ANSWER_CHOICES]
        self._instructions: dict[str, list[int]] = {}

    def method_of(self, request: JudgeRequest) -> str:
        # Reasoned mode scores Yes/No after the rationale: a content-free baseline has no rationale to match.
        if request.mode == "reasoned":
            return CHOICE
        return request.method or self.default_method

    def instructions(self, method: str) -> list[int]:
        if method not in self._instructions:
            text = encode_trusted(self.tokenizer, prompts.instruction_text(method))
            self._instructions[method] = self.layout.system_open + text + self.layout.system_to_user
        return self._instructions[method]

    def encode(self, pieces: list[Piece]) -> list[int]:
        """A segment's pieces as one string (token_layout.encode_text): the ids a server gets for the same text."""
        return encode_text(self.tokenizer, pieces)

    def item_segment(self, request: JudgeRequest, method: str) -> tuple[list[int], list[list[int]]]:
        ids = self.encode(prompts.item_pieces(request, method)) + self.layout.user_to_assistant
        if method == LIKELIHOOD:
            lead_in, statement = prompts.statement_parts(request.criterion)
            return ids + encode_trusted(self.tokenizer, lead_in), [encode_untrusted(self.tokenizer, statement)]
        return ids, self.answer_ids

    def follow_up(self, rationale: str) -> list[int]:
        """Appended after the item segment in reasoned mode: the rationale, then the Yes/No question."""
        layout = self.layout
        return (encode_untrusted(self.tokenizer, rationale.strip()) + layout.assistant_to_user
                + encode_trusted(self.tokenizer, prompts.REASONED_FOLLOW_UP) + layout.user_to_assistant)

    def reserve(self, request: JudgeRequest, choices: list[list[int]]) -> int:
        """Tokens needed after the item segment: the longest choice, and the rationale turn in reasoned mode."""
        extra = max(map(len, choices)) + 1
        if request.mode == "reasoned":
            extra += request.max_tokens + len(self.follow_up("")) + 2
        return extra

    def build(self, requests: Sequence[JudgeRequest]) -> list[BuiltPrompt | PromptError]:
        out: list[BuiltPrompt | PromptError | None] = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            method = self.method_of(request)
            key = (request.trajectory_id, method, request.task, request.reference, request.evidence)
            groups.setdefault(key, []).append(index)
        for (_, method, *_), indexes in groups.items():
            self._build_group(method, [requests[i] for i in indexes], indexes, out)
        return out  # type: ignore[return-value]

    def _build_group(self, method: str, group: list[JudgeRequest], indexes: list[int], out: list) -> None:
        instructions = self.instructions(method)
        segments = [self.item_segment(request, method) for request in group]
        # piece by piece, as a cut context is encoded
        fixed_context = [t for p in prompts.context_pieces(group[0]) if not p.cuttable
                         for t in encode_piece(self.tokenizer, p)]
        rooms = [self.max_model_len - len(instructions) - len(item) - self.reserve(request, choices)
                 for request, (item, choices) in zip(group, segments)]
        # Items whose own segment leaves no room for a minimal context are errors; the rest share one context.
        # (The minimum: the fixed pieces plus a few tokens and a cut marker per evidence block.)
        blocks = sum(1 for p in prompts.context_pieces(group[0]) if p.cuttable)
        minimum = len(fixed_context) + blocks * (MIN_EVIDENCE_TOKENS + CUT_MARKER_TOKENS)
        fitting = [room for room in rooms if room >= minimum]
        context = encode_context(self.tokenizer, prompts.context_pieces(group[0]), min(fitting)) if fitting else None
        baseline = None
        if method == LIKELIHOOD and context is not None:
            baseline = self.encode(prompts.context_pieces(group[0], content_free=True))
        for index, request, room, (item, choices) in zip(indexes, group, rooms, segments):
            needed = len(instructions) + len(item) + self.reserve(request, choices)
            if context is None or room < minimum:
                out[index] = PromptError(
                    f"prompt cannot fit the model's context of {self.max_model_len} tokens: the instructions, task,"
                    f" reference and item need {needed + len(fixed_context)} tokens, and at least "
                    f"{MIN_EVIDENCE_TOKENS} more per evidence block")
                continue
            out[index] = BuiltPrompt(method, instructions + context.ids, item, choices,
                                     instructions + baseline + item if baseline is not None else None,
                                     context.cut_tokens)
