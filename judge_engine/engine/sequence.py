"""One request's token sequence and everything the engine tracks about it between steps."""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from enum import Enum

import torch

from judge_engine.engine.sampler import SamplingParams


class SequenceStatus(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    request_id: str
    token_ids: list[int]
    params: SamplingParams
    # First token index whose log-probability the request needs (prompt_logprobs, LLM.score); the prefix cache
    # never serves the position just before it, so that position's logits are computed.
    logprobs_from: int | None = None
    generator: torch.Generator | None = None
    # Token ids whose log-probability as the next token after the whole sequence is wanted (LLM.score: the
    # first token of each choice, read from one row instead of one sequence per choice).
    next_token_candidates: tuple[int, ...] = ()
    next_token_logprobs: dict[int, float] = field(default_factory=dict)
    # Hidden states wanted (LLM.score_with_usage(hidden_layers=...)): these layers (0 = the embeddings, i = after
    # decoder layer i, num_layers = after the final norm) at these prompt positions, both resolved (non-negative)
    # and in the order asked; the prefix cache never serves the earliest position, so every one is computed.
    hidden_layers: tuple[int, ...] = ()
    hidden_positions: tuple[int, ...] = ()
    num_prompt_tokens: int = field(init=False)
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0          # prompt tokens served by the prefix cache (first admission)
    num_preemptions: int = 0
    output_logprobs: list[dict[int, float]] = field(default_factory=list)
    prompt_token_logprobs: dict[int, float] = field(default_factory=dict)       # position -> log P(token)
    prompt_top_logprobs: dict[int, dict[int, float]] = field(default_factory=dict)
    logits_rows: dict[int, torch.Tensor] = field(default_factory=dict)          # position -> row (return_logits)
    hidden_rows: dict[int, torch.Tensor] = field(default_factory=dict)  # position -> [len(hidden_layers), H]
    finish_reason: str | None = None
    error: str | None = None
    arrival_time: float = field(default_factory=time.perf_counter)
    first_token_time: float | None = None
    finished_time: float | None = None
    stop_text_len: int | None = None    # where a stop string cut the text
    sample_index: int = 0               # which of its request's samples (n, best_of) or beams this is
    cumulative_logprob: float = 0.0     # sum of log P(token) over its output tokens (kept when tracks_logprob)

    def __post_init__(self) -> None:
        self.num_prompt_tokens = len(self.token_ids)

    def fork(self, sample_index: int, generator: torch.Generator | None) -> Sequence:
        """A sibling with the same tokens and progress (the block manager shares its blocks separately); it needs
        neither prompt log-probabilities nor candidate scores: those belong to the request, kept by this one."""
        child = Sequence(self.request_id, list(self.token_ids), self.params, generator=generator,
                         sample_index=sample_index, status=self.status,
                         num_computed_tokens=self.num_computed_tokens, num_cached_tokens=self.num_cached_tokens,
                         output_logprobs=list(self.output_logprobs), arrival_time=self.arrival_time,
                         first_token_time=self.first_token_time, cumulative_logprob=self.cumulative_logprob)
        child.num_prompt_tokens = self.num_prompt_tokens
        return child

    @property
    def tracks_logprob(self) -> bool:
        """Whether each sampled token's log-probability is read: asked for, or needed to rank several samples."""
        return self.params.logprobs is not None or self.params.best_of > 1

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    @property
    def max_cacheable_tokens(self) -> int:
        """Tokens the prefix cache may serve: never all of them (the last position's logits are needed), never
        the position before logprobs_from and never a position whose hidden states are wanted."""
        limit = self.num_tokens - 1
        if self.logprobs_from is not None:
            limit = min(limit, self.logprobs_from - 1)
        if self.hidden_layers:
            limit = min(limit, min(self.hidden_positions))
        return max(limit, 0)

    def hidden_positions_in(self, start: int, end: int) -> list[int]:
        """Distinct positions in [start, end) (computed this step) whose hidden states the request needs."""
        if not self.hidden_layers:
            return []
        return sorted({p for p in self.hidden_positions if start <= p < end})

    def needs_logits_rows(self, start: int, end: int) -> list[int]:
        """Positions in [start, end) (computed this step) whose logits the request needs."""
        positions: list[int] = []
        if self.logprobs_from is not None:
            first = max(start, self.logprobs_from - 1)
            last = min(end, self.num_prompt_tokens - 1)
            positions.extend(range(first, last))
        if end == self.num_tokens and (self.wants_next_token or self.next_token_candidates):
            positions.append(end - 1)
        return positions

    @property
    def wants_next_token(self) -> bool:
        return self.num_output_tokens < self.params.max_tokens


def resolve_hidden_layers(layers, num_layers: int) -> tuple[int, ...]:
    """Layer indices as transformers' output_hidden_states counts them (0 = the embeddings, num_layers = the final
    norm's output; negative from the end, -1 = num_layers), made non-negative; ValueError naming the first one out
    of range."""
    resolved = []
    for layer in _integers(layers, "hidden_layers"):
        index = _index(layer, "hidden_layers")
        if not -(num_layers + 1) <= index <= num_layers:
            raise ValueError(f"hidden_layers: layer {index} is out of range for a {num_layers}-layer model "
                             f"(valid: {-(num_layers + 1)}..{num_layers}; 0 = the embeddings, "
                             f"{num_layers} = the final norm's output)")
        resolved.append(index % (num_layers + 1))
    return tuple(resolved)


def resolve_hidden_positions(positions, num_tokens: int) -> tuple[int, ...]:
    """Prompt positions (negative from its end, -1 = its last token) made non-negative; ValueError naming the first
    one out of range."""
    resolved = []
    for position in _integers(positions, "hidden_positions"):
        index = _index(position, "hidden_positions")
        if not -num_tokens <= index < num_tokens:
            raise ValueError(f"hidden position {index} is out of range for a {num_tokens}-token prompt "
                             f"(valid: {-num_tokens}..{num_tokens - 1})")
        resolved.append(index % num_tokens)
    return tuple(resolved)


def _integers(values, name: str):
    if isinstance(values, (int, str, bytes)):
        raise TypeError(f"{name}: expected a sequence of integers, got {values!r}")
    return values


def _index(value, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected integers, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected integers, got {value!r}") from None
