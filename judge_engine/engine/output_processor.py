"""What a request keeps from each step and what it hands back: log-probabilities read from the logits rows, the
stop decision after each sampled token (stop tokens, stop strings over the incrementally detokenized text, length),
and the RequestOutput built from a sequence. The engine steps; this module turns steps into outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from judge_engine.engine.detokenizer import IncrementalDetokenizer
from judge_engine.layers.log_softmax import log_softmax
from judge_engine.outputs import CompletionOutput, RequestMetrics, RequestOutput
from judge_engine.engine.sampler import SamplingError, top_logprobs
from judge_engine.engine.scheduler import ScheduledSequence
from judge_engine.engine.sequence import Sequence

if TYPE_CHECKING:
    from judge_engine.engine.beam_search import BeamState


@dataclass(eq=False)
class TrackedRequest:
    """A request as the engine tracks it: its first sequence and, with several samples or beams, their group (each
    sample or beam is tracked like a request of its own, text and stop strings included, inside the group)."""
    seq: Sequence
    prompt: str | None
    stream: bool
    detokenizer: IncrementalDetokenizer | None  # per-step text, only when stop strings or streaming need it
    reported_tokens: int = 0
    reported_text: int = 0
    rejected: bool = False   # refused before it ran: its prompt cannot run as given (the caller's mistake)
    group: SampleGroup | None = None

    @property
    def samples(self) -> list[TrackedRequest]:
        return list(self.group.members.values()) if self.group is not None else [self]

    @property
    def finished(self) -> bool:
        return all(sample.seq.is_finished for sample in self.samples)

    @property
    def streams(self) -> bool:
        """Whether unfinished outputs go out: not while candidates may still be dropped (best_of > n, beams)."""
        return self.stream and (self.group is None or self.group.streamable)

    def has_new_tokens(self) -> bool:
        return any(s.seq.num_output_tokens > s.reported_tokens for s in self.samples)


@dataclass(eq=False)
class SampleGroup:
    """The sequences of a request with several samples (n, best_of) or beams, in sample order."""
    members: dict[Sequence, TrackedRequest] = field(default_factory=dict)
    forked: bool = False            # the samples exist (the first one forks them when its prompt is computed)
    generated_tokens: int = 0       # by every member, dropped beams included
    beam: BeamState | None = None

    @property
    def streamable(self) -> bool:
        first = next(iter(self.members))
        return self.beam is None and first.params.best_of == first.params.n


class OutputProcessor:
    def __init__(self, tokenizer, eos_token_ids: frozenset[int], max_seq_len: int) -> None:
        self.tokenizer = tokenizer
        self.eos_token_ids = eos_token_ids
        self.max_seq_len = max_seq_len

    def track(self, seq: Sequence, prompt: str | None, stream: bool) -> TrackedRequest:
        """A request about to run; per-step text is decoded only when streaming or stop strings need it."""
        needs_text = stream or bool(seq.params.stop_strings)
        detok = IncrementalDetokenizer.for_prompt(self.tokenizer, seq.token_ids) if needs_text else None
        return TrackedRequest(seq, prompt, stream, detok)

    # -- logits rows ----------------------------------------------------------------------------------
    def record_rows(self, item: ScheduledSequence, positions: list[int], rows: torch.Tensor) -> None:
        """What a request keeps from its logits rows besides the next token: raw rows, prompt and candidate
        log-probabilities."""
        seq = item.seq
        if seq.params.return_logits:
            for position, logits_row in zip(positions, rows):
                seq.logits_rows[position] = logits_row.clone()  # a recompute overwrites, never duplicates
        prompt_positions = [p for p in positions if p < seq.num_prompt_tokens - 1]
        if prompt_positions:
            self._record_prompt_logprobs(seq, prompt_positions, rows[:len(prompt_positions)])
        if item.end == seq.num_tokens and seq.next_token_candidates:
            last = log_softmax(rows[-1])
            seq.next_token_logprobs = {t: float(last[t]) for t in seq.next_token_candidates}

    @staticmethod
    def _record_prompt_logprobs(seq: Sequence, positions: list[int], rows: torch.Tensor) -> None:
        logprobs = log_softmax(rows)
        targets = torch.tensor([seq.token_ids[p + 1] for p in positions])
        chosen = logprobs.gather(1, targets[:, None])[:, 0].tolist()
        top_n = seq.params.prompt_logprobs
        for i, (p, value) in enumerate(zip(positions, chosen)):
            seq.prompt_token_logprobs[p + 1] = value
            if top_n is not None:
                seq.prompt_top_logprobs[p + 1] = top_logprobs(logprobs[i], seq.token_ids[p + 1], top_n)

    @staticmethod
    def sampled_logprob_rows(logits: torch.Tensor, seqs: list[Sequence], tokens: list) -> dict[int, torch.Tensor]:
        """Per index of `seqs` that asked for logprobs and got a token: its row of log-probabilities."""
        wanted = [i for i, s in enumerate(seqs) if s.tracks_logprob and not isinstance(tokens[i], SamplingError)]
        if not wanted:
            return {}
        logprobs = log_softmax(logits[wanted])
        return {i: logprobs[row] for row, i in enumerate(wanted)}

    @staticmethod
    def record_sampled_logprobs(seq: Sequence, row: torch.Tensor, token: int) -> None:
        """The sampled token's log-probability (into the cumulative one) and the top-N the request asked for."""
        seq.cumulative_logprob += float(row[token])
        if seq.params.logprobs is not None:
            seq.output_logprobs.append(top_logprobs(row, token, seq.params.logprobs))

    # -- after each sampled token ---------------------------------------------------------------------
    def stop_reason(self, request: TrackedRequest, token: int) -> str | None:
        """"stop" or "length" when the token just appended ends the request, else None; decodes its text so far
        when the request keeps text."""
        seq, params = request.seq, request.seq.params
        if (token in self.eos_token_ids and not params.ignore_eos) or token in (params.stop_token_ids or ()):
            return "stop"
        if request.detokenizer is not None:
            previous_len = len(request.detokenizer.text)
            request.detokenizer.step()
            if params.stop_strings and self._cut_at_stop_string(request, previous_len):
                return "stop"
        if seq.num_output_tokens >= params.max_tokens or seq.num_tokens >= self.max_seq_len:
            return "length"
        return None

    @staticmethod
    def _cut_at_stop_string(request: TrackedRequest, previous_len: int) -> bool:
        detok, params = request.detokenizer, request.seq.params
        longest = max(len(s) for s in params.stop_strings)
        search_from = max(previous_len - longest + 1, 0)
        hits = [(detok.text.find(s, search_from), s) for s in params.stop_strings]
        hits = [(index, s) for index, s in hits if index >= 0]
        if not hits:
            return False
        index, stop = min(hits)
        request.seq.stop_text_len = index + len(stop) if params.include_stop_str_in_output else index
        return True

    # -- outputs --------------------------------------------------------------------------------------
    def output(self, request: TrackedRequest, text: str | None = None) -> RequestOutput:
        """The request's output now (final when all of its sequences finished); the increments since its previous
        output are new_token_ids and new_text. `text` replaces the text of every completion (a failed decode)."""
        seq = request.seq
        completions = self._completions(request, text)
        first = completions[0]
        samples = request.samples
        error = next((s.seq.error for s in samples if s.seq.error is not None), seq.error)
        finish_reason = first.finish_reason
        if request.group is not None and any(s.seq.finish_reason == "error" for s in samples):
            finish_reason = "error"
        generated = request.group.generated_tokens if request.group is not None else seq.num_output_tokens
        return RequestOutput(
            request_id=seq.request_id,
            prompt=request.prompt,
            prompt_token_ids=seq.token_ids[:seq.num_prompt_tokens],
            text=first.text,
            token_ids=first.token_ids,
            finished=request.finished,
            finish_reason=finish_reason,
            new_token_ids=first.new_token_ids,
            new_text=first.new_text,
            logprobs=first.logprobs,
            prompt_logprobs=self._prompt_logprobs(seq),
            logits=(torch.stack([seq.logits_rows[p] for p in sorted(seq.logits_rows)])
                    if seq.logits_rows else None),
            logits_positions=sorted(seq.logits_rows) if seq.params.return_logits else None,
            error=error,
            rejected=request.rejected,
            next_token_logprobs=dict(seq.next_token_logprobs) if seq.next_token_candidates else None,
            hidden_states=self._hidden_states(seq),
            metrics=RequestMetrics(seq.arrival_time, seq.first_token_time, _finished_time(samples), generated,
                                   seq.num_cached_tokens, sum(s.seq.num_preemptions for s in samples)),
            outputs=completions,
        )

    def _completions(self, request: TrackedRequest, text: str | None) -> list[CompletionOutput]:
        group = request.group
        if group is not None and group.beam is not None and group.beam.ranked is not None:
            return [self._hypothesis_output(i, h) for i, h in enumerate(group.beam.ranked)]
        samples = request.samples
        if request.finished and len(samples) > 1 and samples[0].seq.params.best_of > samples[0].seq.params.n:
            # best_of: the n candidates with the highest cumulative log-probability, best first
            samples = sorted(samples, key=lambda s: -s.seq.cumulative_logprob)[:samples[0].seq.params.n]
        return [self._completion(i, sample, text) for i, sample in enumerate(samples)]

    def _completion(self, index: int, request: TrackedRequest, text: str | None) -> CompletionOutput:
        seq = request.seq
        text = self._text(request) if text is None else text
        new_tokens = seq.output_token_ids[request.reported_tokens:]
        new_text = text[request.reported_text:]
        request.reported_tokens = seq.num_output_tokens
        request.reported_text = len(text)
        return CompletionOutput(
            index=index, text=text, token_ids=list(seq.output_token_ids),
            cumulative_logprob=seq.cumulative_logprob if seq.tracks_logprob else None,
            logprobs=list(seq.output_logprobs) if seq.params.logprobs is not None else None,
            finish_reason=seq.finish_reason, new_token_ids=new_tokens, new_text=new_text)

    def _hypothesis_output(self, index: int, hypothesis) -> CompletionOutput:
        text = self.tokenizer.decode(hypothesis.token_ids, skip_special_tokens=True)
        return CompletionOutput(index=index, text=text, token_ids=list(hypothesis.token_ids),
                                cumulative_logprob=hypothesis.cumulative_logprob, logprobs=None,
                                finish_reason=hypothesis.finish_reason, new_token_ids=list(hypothesis.token_ids),
                                new_text=text)

    def _text(self, request: TrackedRequest) -> str:
        seq = request.seq
        if request.detokenizer is None:
            if not seq.is_finished or not seq.num_output_tokens:
                return ""
            return self.tokenizer.decode(seq.output_token_ids, skip_special_tokens=True)
        text = request.detokenizer.text
        if seq.is_finished and seq.stop_text_len is None:
            request.detokenizer.flush()
            text = request.detokenizer.text
        if seq.stop_text_len is not None:
            return text[:seq.stop_text_len]
        if not seq.is_finished and seq.params.stop_strings:
            # hold back what could be the start of a stop string completed by the next token
            hold = max(len(s) for s in seq.params.stop_strings) - 1
            return text[:max(len(text) - hold, request.reported_text)]
        return text

    @staticmethod
    def _hidden_states(seq: Sequence) -> torch.Tensor | None:
        """[len(hidden_positions), len(hidden_layers), H] in the order asked, once every position was computed."""
        if not seq.hidden_layers or any(p not in seq.hidden_rows for p in seq.hidden_positions):
            return None
        return torch.stack([seq.hidden_rows[p] for p in seq.hidden_positions])

    @staticmethod
    def _prompt_logprobs(seq: Sequence) -> list[dict[int, float] | None] | None:
        if seq.logprobs_from is None:
            return None
        result: list[dict[int, float] | None] = [None] * seq.num_prompt_tokens
        for position, value in seq.prompt_token_logprobs.items():
            result[position] = seq.prompt_top_logprobs.get(position) or {seq.token_ids[position]: value}
        return result


def _finished_time(samples: list[TrackedRequest]) -> float | None:
    times = [s.seq.finished_time for s in samples]
    return None if None in times else max(times)
