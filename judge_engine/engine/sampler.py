"""Per-request sampling parameters and the batched sampler that turns logits rows into next tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


class SamplingParamsError(ValueError):
    """A sampling parameter has an invalid value; the message names it."""


class SamplingError(RuntimeError):
    """One row could not be sampled (its probabilities are not a distribution); returned in place of that row's
    token, so one request's failure never costs the other requests of the batch their tokens."""


# Below this, temperature sampling is greedy decoding in all but name (softmax(l / T) tends to the argmax), and
# dividing float32 logits by it can overflow to inf and make the softmax NaN. vLLM's greedy threshold.
GREEDY_TEMPERATURE = 1e-5
# torch.Generator.manual_seed takes a 64-bit value; the OpenAI-compatible range is that of a signed int64.
SEED_MIN, SEED_MAX = -(2 ** 63), 2 ** 63 - 1


@dataclass
class SamplingParams:
    temperature: float = 1.0      # 0: greedy
    top_p: float = 1.0
    top_k: int = 0                # 0 or -1: off
    max_tokens: int = 16          # 0: only run the prompt (useful with prompt_logprobs)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    logprobs: int | None = None   # top-N log-probabilities of each generated token (plus the chosen one)
    prompt_logprobs: int | None = None  # same for every prompt token after the first
    seed: int | None = None       # per-request generator: the same seed gives the same tokens in any batch
    include_stop_str_in_output: bool = False
    return_logits: bool = False   # keep the float32 logits rows of the request (tests, debugging)
    n: int = 1                    # completions returned
    # candidates generated (None: n); the n with the highest cumulative log-probability are returned. All of a
    # request's candidates share its prompt's KV blocks; candidate i draws with sample_seed(seed, i).
    best_of: int | None = None
    stop_strings: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if (isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float))
                or not math.isfinite(self.temperature) or self.temperature < 0):
            raise SamplingParamsError(f"temperature: expected a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0.0 < self.top_p <= 1.0:
            raise SamplingParamsError(f"top_p: expected a number in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise SamplingParamsError(f"top_k: expected an integer >= -1 (0 or -1: off), got {self.top_k!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 0:
            raise SamplingParamsError(f"max_tokens: expected an integer >= 0, got {self.max_tokens!r}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise SamplingParamsError(f"{name}: expected None or an integer >= 0, got {value!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not SEED_MIN <= self.seed <= SEED_MAX):
            raise SamplingParamsError(f"seed: expected None or an integer in [-2**63, 2**63 - 1], got {self.seed!r}")
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if any(not isinstance(s, str) or not s for s in stop):
            raise SamplingParamsError(f"stop: expected non-empty strings, got {self.stop!r}")
        self.stop_strings = tuple(stop)
        if any(isinstance(t, bool) or not isinstance(t, int) for t in self.stop_token_ids or []):
            raise SamplingParamsError(f"stop_token_ids: expected integers, got {self.stop_token_ids!r}")
        self._check_samples()

    def _check_samples(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise SamplingParamsError(f"n: expected an integer >= 1, got {self.n!r}")
        if self.best_of is None:
            self.best_of = self.n
        if isinstance(self.best_of, bool) or not isinstance(self.best_of, int) or self.best_of < self.n:
            raise SamplingParamsError(f"best_of: expected None or an integer >= n ({self.n}), got {self.best_of!r}")
        if self.best_of > 1 and self.return_logits:
            raise SamplingParamsError("return_logits: not available with several samples (n or best_of > 1)")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE


def sample_seed(seed: int, index: int) -> int:
    """The seed of a request's sample `index`: seed + index, wrapped into the signed 64-bit range (vLLM's rule), so
    that sample i of a seeded request with n samples equals a request of n=1 seeded with seed + i."""
    return (seed + index - SEED_MIN) % 2 ** 64 + SEED_MIN


def make_generator(params: SamplingParams, device: torch.device, sample_index: int = 0) -> torch.Generator | None:
    """A sequence's own generator, so its draws never depend on which other requests share the batch."""
    if params.greedy:
        return None
    generator = torch.Generator(device=device)
    if params.seed is not None:
        generator.manual_seed(sample_seed(params.seed, sample_index))
    else:
        generator.seed()
    return generator


def sample(logits: torch.Tensor, params: list[SamplingParams],
           generators: list[torch.Generator | None]) -> list[int | SamplingError]:
    """One token per row of float32 `logits` [N, V], or a SamplingError for a row that cannot be sampled;
    greedy rows in one argmax, random rows one by one because each draws from its own generator."""
    tokens: list[int | SamplingError] = list(torch.argmax(logits, dim=-1).tolist())
    usable = (torch.isfinite(logits).any(dim=-1) & ~torch.isnan(logits).any(dim=-1)).tolist()
    for row, (p, generator) in enumerate(zip(params, generators)):
        if not usable[row]:
            tokens[row] = SamplingError("the model's next-token logits are NaN or all infinite")
        elif not p.greedy:
            tokens[row] = _guarded_sample_row(logits[row], p, generator)
    return tokens


def _guarded_sample_row(logits: torch.Tensor, p: SamplingParams,
                        generator: torch.Generator) -> int | SamplingError:
    try:
        return _sample_row(logits, p, generator)
    except Exception as error:  # noqa: BLE001 - whatever breaks one row must stay that row's failure
        return SamplingError(f"sampling failed (temperature={p.temperature!r}, top_p={p.top_p!r}, "
                             f"top_k={p.top_k!r}): {type(error).__name__}: {error}")


def _sample_row(logits: torch.Tensor, p: SamplingParams, generator: torch.Generator) -> int:
    scaled = logits / p.temperature
    if p.top_k > 0 and p.top_k < scaled.numel():
        kth = torch.topk(scaled, p.top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if p.top_p < 1.0:
        sorted_logits, order = torch.sort(scaled, descending=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(-1)
        # keep the smallest set whose mass reaches top_p: a token is dropped when the mass before it already does
        drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) >= p.top_p
        drop_sorted[0] = False
        scaled = scaled.masked_fill(torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted), float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if not bool(torch.isfinite(probs).all()):
        raise SamplingError("the next-token probabilities are not finite")
    return int(torch.multinomial(probs, 1, generator=generator).item())


def top_logprobs(logprobs_row: torch.Tensor, chosen: int, n: int) -> dict[int, float]:
    """The chosen token's log-probability plus the n most likely ones, from a log_softmax row."""
    result = {chosen: float(logprobs_row[chosen])}
    if n > 0:
        values, ids = torch.topk(logprobs_row, min(n, logprobs_row.numel()))
        for token_id, value in zip(ids.tolist(), values.tolist()):
            result.setdefault(token_id, value)
    return result
