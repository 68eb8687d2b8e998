"""Beam search as the engine runs it (LLM.beam_search): the rule, and what a request's beams keep between steps.

The rule (vLLM's LLM.beam_search): every live beam proposes its 2 * beam_width most likely next tokens, scored
by the beam's cumulative log-probability plus the token's; a proposal ending in EOS completes a hypothesis, and of
the others the beam_width best become the next live beams. After max_tokens steps the live beams complete too,
and the beam_width hypotheses with the best length-normalised score, cumulative_logprob / length **
length_penalty (length: generated tokens, a final EOS not counted), are returned, best first.

The engine keeps one sequence per live beam: a beam kept once continues in its own sequence, a beam kept
several times is forked (the forks share its blocks; the partial last one is copied on write), and a beam not
kept is freed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from judge_engine.layers.log_softmax import log_softmax

if TYPE_CHECKING:
    from judge_engine.engine.sequence import Sequence


class BeamSearchParamsError(ValueError):
    """A beam search parameter has an invalid value; the message names it."""


@dataclass(frozen=True)
class BeamSearchParams:
    beam_width: int
    max_tokens: int
    length_penalty: float = 1.0
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        for name in ("beam_width", "max_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BeamSearchParamsError(f"{name}: expected an integer >= 1, got {value!r}")
        if (isinstance(self.length_penalty, bool) or not isinstance(self.length_penalty, (int, float))
                or not math.isfinite(self.length_penalty)):
            raise BeamSearchParamsError(f"length_penalty: expected a finite number, got {self.length_penalty!r}")


@dataclass(frozen=True)
class Hypothesis:
    token_ids: tuple[int, ...]   # generated tokens; ends with EOS when finish_reason is "stop"
    cumulative_logprob: float
    finish_reason: str           # "stop" (EOS) or "length"

    def score(self, length_penalty: float) -> float:
        length = len(self.token_ids) - (1 if self.finish_reason == "stop" else 0)
        return self.cumulative_logprob / max(length, 1) ** length_penalty


@dataclass(frozen=True)
class Candidate:
    beam: int                    # index of the live beam it extends
    token: int
    cumulative_logprob: float


@dataclass(eq=False)
class BeamState:
    params: BeamSearchParams
    live: list[Sequence]                                       # the live beams, best first
    proposals: dict[Sequence, list[tuple[int, float]]] = field(default_factory=dict)  # computed this round
    completed: list[Hypothesis] = field(default_factory=list)
    ranked: list[Hypothesis] | None = None                     # the result, once the search is over

    def ready(self) -> bool:
        """Every live beam has proposed its next tokens."""
        return all(seq in self.proposals for seq in self.live)

    def plan_round(self, end_tokens: frozenset[int]) -> list[Candidate]:
        """The candidates kept this round, best first; those that ended are recorded as hypotheses."""
        if self.params.ignore_eos:
            end_tokens = frozenset()
        kept, ended = extend([(s.cumulative_logprob, self.proposals[s]) for s in self.live],
                             self.params.beam_width, end_tokens)
        for c in ended:
            self.completed.append(Hypothesis((*self.live[c.beam].output_token_ids, c.token), c.cumulative_logprob,
                                             "stop"))
        return kept

    def end_round(self, continuing: list[Sequence], max_seq_len: int) -> bool:
        """The live beams after this round's tokens were appended; True when the search is over (then `ranked`
        holds its result)."""
        self.live, self.proposals = continuing, {}
        if continuing and continuing[0].num_output_tokens < self.params.max_tokens \
                and continuing[0].num_tokens < max_seq_len:
            return False
        self.completed += [Hypothesis(tuple(s.output_token_ids), s.cumulative_logprob, "length") for s in continuing]
        self.ranked = sorted(self.completed, key=lambda h: -h.score(self.params.length_penalty))[
            :self.params.beam_width]
        return True


def proposals(logits_row: torch.Tensor, beam_width: int) -> list[tuple[int, float]]:
    """A beam's 2 * beam_width most likely next tokens and their log-probabilities, most likely first."""
    logprobs = log_softmax(logits_row.float())
    values, ids = torch.topk(logprobs, min(2 * beam_width, logprobs.numel()))
    return list(zip(ids.tolist(), values.tolist()))


def extend(beams: list[tuple[float, list[tuple[int, float]]]], beam_width: int,
           end_tokens: frozenset[int]) -> tuple[list[Candidate], list[Candidate]]:
    """One round: (kept, ended) from each live beam's (cumulative log-probability, proposals). Kept: the
    beam_width best proposals that do not end the beam, best first (ties keep beam, then proposal, order)."""
    candidates = [Candidate(index, token, cumulative + logprob)
                  for index, (cumulative, row) in enumerate(beams) for token, logprob in row]
    ended = [c for c in candidates if c.token in end_tokens]
    going = [c for c in candidates if c.token not in end_tokens]
    return sorted(going, key=lambda c: -c.cumulative_logprob)[:beam_width], ended
