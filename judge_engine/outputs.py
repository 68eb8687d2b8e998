"""What the engine hands back: per-request outputs (final or streamed increments) and score errors."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class RequestMetrics:
    arrival_time: float                 # time.perf_counter() when the request was added
    first_token_time: float | None      # when its first output token was sampled
    finished_time: float | None
    num_output_tokens: int
    num_cached_tokens: int              # prompt tokens served by the prefix cache
    num_preemptions: int

    @property
    def time_to_first_token(self) -> float | None:
        if self.first_token_time is None:
            return None
        return self.first_token_time - self.arrival_time

    @property
    def time_per_output_token(self) -> float | None:
        """Mean gap between output tokens after the first (None with fewer than two)."""
        if self.finished_time is None or self.first_token_time is None or self.num_output_tokens < 2:
            return None
        return (self.finished_time - self.first_token_time) / (self.num_output_tokens - 1)


@dataclass(frozen=True)
class TokenUsage:
    """Prompt tokens one request (or one scored prompt, all of its sequences) put through the engine."""
    prompt_tokens: int = 0       # every prompt token of its sequences
    cached_tokens: int = 0       # of those, served by the prefix cache instead of computed
    output_tokens: int = 0       # generated tokens

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens that went through the model (a preempted sequence's recomputation not included)."""
        return self.prompt_tokens - self.cached_tokens

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        return TokenUsage(self.prompt_tokens + other.prompt_tokens, self.cached_tokens + other.cached_tokens,
                          self.output_tokens + other.output_tokens)


@dataclass
class CompletionOutput:
    """One of a request's completions (vLLM's shape): with n > 1 or beam search, RequestOutput.outputs holds n."""
    index: int                          # its place in RequestOutput.outputs
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None    # sum of its tokens' log P; None unless logprobs or several samples
    logprobs: list[dict[int, float]] | None
    finish_reason: str | None
    new_token_ids: list[int] = field(default_factory=list)  # since the request's previous output
    new_text: str = ""


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    text: str                           # all output text so far (stop string removed)
    token_ids: list[int]                # all output token ids so far
    finished: bool
    finish_reason: str | None = None    # "stop" | "length" | "abort" | "error" | None while running
    new_token_ids: list[int] = field(default_factory=list)  # since this request's previous output
    new_text: str = ""                                      # text delta since its previous output
    logprobs: list[dict[int, float]] | None = None          # per output token: chosen + top-N
    prompt_logprobs: list[dict[int, float] | None] | None = None  # per prompt token (None for the first)
    logits: torch.Tensor | None = None  # SamplingParams.return_logits: float32 rows, one per logits_positions
    logits_positions: list[int] | None = None  # position p's row predicts token p + 1
    error: str | None = None
    # with finish_reason "error": True when the request was refused before it ran (its prompt cannot run as given:
    # the caller's mistake), False when it failed while running (the engine's)
    rejected: bool = False
    next_token_logprobs: dict[int, float] | None = None  # add_request(next_token_candidates=...) only
    # add_request(hidden_layers=..., hidden_positions=...) only, once every asked position was computed: float32 CPU
    # [len(hidden_positions), len(hidden_layers), hidden_size], in the order asked
    hidden_states: torch.Tensor | None = None
    metrics: RequestMetrics | None = None
    # Every completion, best first when ranked (best_of > n, beam search), else in sample order; the fields
    # above (text, token_ids, finish_reason, new_*, logprobs) are those of outputs[0].
    outputs: list[CompletionOutput] = field(default_factory=list)

    @property
    def usage(self) -> TokenUsage:
        """This request's prompt tokens, those its prefix-cache hits served, and its output tokens (of every
        sample or beam it generated, returned or not)."""
        cached = self.metrics.num_cached_tokens if self.metrics is not None else 0
        generated = self.metrics.num_output_tokens if self.metrics is not None else len(self.token_ids)
        return TokenUsage(len(self.prompt_token_ids), cached, generated)


@dataclass(frozen=True)
class Scored:
    """One prompt's result from LLM.score_with_usage: lps[j] = log P(choice j | prompt), and what it cost.

    hidden_states: with score_with_usage(hidden_layers=...), float32 on the CPU, [len(hidden_positions),
    len(hidden_layers), hidden_size] in the order asked (layer 0 = the embeddings, i = after decoder layer i,
    num_layers = after the final norm, as transformers' output_hidden_states); None when no layers were asked."""
    logprobs: list[float]
    usage: TokenUsage
    hidden_states: torch.Tensor | None = None


class ScoreError(ValueError):
    """Why one prompt of LLM.score could not be scored; returned in its place in the result list (an exception
    that is also a value), so one bad prompt never sinks the batch."""

    def __init__(self, prompt_index: int, message: str) -> None:
        super().__init__(f"prompt {prompt_index}: {message}")
        self.prompt_index = prompt_index
        self.message = message
