"""LLMEngine: the step-level API (add_request, step, abort_request) over scheduler, model runner and sampler;
what each step means for a request's output (log-probabilities, stop decisions, text) is output_processor.py's.

Thread-safety: none. One thread drives an engine (add_request, step, abort_request, stats); a server runs the
step loop in one dedicated thread and hands requests and aborts to it through a queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

import torch

from judge_engine.engine.beam_search import BeamSearchParams, BeamState, proposals
from judge_engine.engine.block_manager import BlockManager
from judge_engine.config import EngineConfig
from judge_engine.engine.kv_cache import allocate_kv_cache, cpu_num_blocks, cuda_num_blocks
from judge_engine.engine.model_runner import ModelRunner
from judge_engine.engine.output_processor import OutputProcessor, SampleGroup, TrackedRequest
from judge_engine.outputs import RequestOutput
from judge_engine.engine.sampler import SamplingError, SamplingParams, make_generator, sample
from judge_engine.engine.step_budget import attention_break_even
from judge_engine.engine.scheduler import Scheduler, ScheduledSequence, SchedulerOutput
from judge_engine.engine.sequence import (Sequence, SequenceStatus, resolve_hidden_layers,
                                          resolve_hidden_positions)
from judge_engine.engine.stats import EngineStats

log = logging.getLogger(__name__)


class LLMEngine:
    def __init__(self, config: EngineConfig) -> None:
        from judge_engine.loading.loader import load_model
        from judge_engine.loading.tokenizer import load_tokenizer
        from judge_engine.loading.weights import resolve_model_path

        self.config = config
        self.device = torch.device(config.device)
        self.model_path = resolve_model_path(config.model, config.cache_dir)
        self.model, self.spec = load_model(self.model_path, config.torch_dtype, self.device,
                                           cache_dir=config.cache_dir, max_model_len=config.max_model_len,
                                           quantization=config.quantization, **_backend_option(config))
        self.tokenizer = load_tokenizer(self.model_path, config.cache_dir)
        self.max_model_len = min(config.max_model_len or self.spec.max_position_embeddings,
                                 self.spec.max_position_embeddings)
        num_blocks = self._size_kv_cache()
        self.kv_storage, kv_caches = allocate_kv_cache(self.spec, num_blocks, config.block_size,
                                                       config.torch_dtype, self.device)
        self.block_manager = BlockManager(num_blocks, config.block_size, config.enable_prefix_caching)
        self.stats_counters = EngineStats(kv_blocks_total=num_blocks, block_size=config.block_size)
        self.scheduler = Scheduler(self.block_manager, config.max_num_seqs, config.max_num_batched_tokens,
                                   self.stats_counters, sliding_window=self.spec.sliding_window,
                                   long_prefill_tokens=config.long_prefill_tokens,
                                   break_even=attention_break_even(self.spec))
        self.runner = ModelRunner(self.model, kv_caches, config.block_size, self.device)
        eos = set(self.spec.eos_token_ids)
        if self.tokenizer.eos_token_id is not None:
            eos.add(self.tokenizer.eos_token_id)
        # a sequence may never outgrow the whole cache, or preempting everyone else would not make it fit
        self.max_seq_len = min(self.max_model_len, num_blocks * config.block_size)
        self.output_processor = OutputProcessor(self.tokenizer, frozenset(eos), self.max_seq_len)
        self._requests: dict[str, TrackedRequest] = {}
        self._ready: list[RequestOutput] = []  # rejected requests, reported by the next step()
        # request id -> its prompt tokens in the KV cache after the last step (computed, or served by the prefix
        # cache when admitted), for each request whose prompt that step worked on: progress reports (LLM.score's
        # on_prefill) read it after a step. A new dict each step, never changed after, so a reader in another
        # thread sees one step's whole figures.
        self.last_step_prompt_tokens: dict[str, int] = {}

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self.output_processor.eos_token_ids

    @eos_token_ids.setter
    def eos_token_ids(self, token_ids: frozenset[int]) -> None:
        self.output_processor.eos_token_ids = frozenset(token_ids)

    def _size_kv_cache(self) -> int:
        if self.device.type != "cuda":
            return cpu_num_blocks(self.config, self.spec)
        return cuda_num_blocks(self.config, self.spec, self._warm_up)

    def _warm_up(self) -> None:
        """One prefill of max_num_batched_tokens into a throw-away cache, to measure peak activations."""
        bs = self.config.block_size
        tokens = min(self.config.max_num_batched_tokens, self.max_model_len)
        blocks = -(-tokens // bs)
        _, caches = allocate_kv_cache(self.spec, blocks, bs, self.config.torch_dtype, self.device)
        seq = Sequence("warm-up", [0] * tokens, SamplingParams(max_tokens=1))
        scheduled = ScheduledSequence(seq, 0, tokens, block_table=list(range(blocks)))
        ModelRunner(self.model, caches, bs, self.device).execute([scheduled])

    # -- requests -------------------------------------------------------------------------------------
    def encode(self, prompt: str | list[int]) -> list[int]:
        """Token ids of a prompt: strings go through the tokenizer with special tokens parsed (a chat template's
        output); the tokenizer's own BOS is added unless the text already starts with it."""
        if not isinstance(prompt, str):
            return list(map(int, prompt))
        bos = getattr(self.tokenizer, "bos_token", None)
        add_special = not (bos and prompt.startswith(bos))
        return list(self.tokenizer(prompt, add_special_tokens=add_special)["input_ids"])

    def add_request(self, request_id: str, prompt: str | list[int], params: SamplingParams | None = None,
                    *, stream: bool = True, logprobs_from: int | None = None,
                    next_token_candidates: tuple[int, ...] = (), hidden_layers: Collection[int] = (),
                    hidden_positions: Collection[int] = ()) -> None:
        """Queue a request. A prompt that cannot run (empty, longer than the context or the whole KV cache)
        is not an exception: its error output comes back from the next step(). With stream=True, step()
        also returns an unfinished output each time the request gains tokens.

        logprobs_from: also compute log P(token) of every prompt token from this index on (LLM.score);
        next_token_candidates: also compute the log-probability of these ids as the token after the prompt;
        hidden_layers, hidden_positions: also keep the hidden states of these layers (0 = the embeddings, i = after
        decoder layer i, num_layers = after the final norm; negative from the end) at these prompt positions
        (negative from the prompt's end), returned as RequestOutput.hidden_states [positions, layers, hidden].
        A layer out of range raises ValueError; a position out of range fails the request like a bad prompt."""
        if request_id in self._requests:
            raise ValueError(f"request_id {request_id!r} is already in the engine")
        params = params or SamplingParams()
        layers = resolve_hidden_layers(hidden_layers, self.spec.num_layers)
        if layers and not hidden_positions:
            raise ValueError("hidden_positions: expected at least one prompt position for hidden_layers")
        token_ids = self.encode(prompt)
        if params.prompt_logprobs is not None:
            logprobs_from = 1
        positions, problem = (), None
        if layers:
            try:
                positions = resolve_hidden_positions(hidden_positions, len(token_ids))
            except ValueError as error:
                layers, problem = (), str(error)
        seq = Sequence(request_id, token_ids, params, logprobs_from=logprobs_from,
                       generator=make_generator(params, torch.device("cpu")),
                       next_token_candidates=tuple(next_token_candidates), hidden_layers=layers,
                       hidden_positions=positions)
        self._admit(seq, prompt if isinstance(prompt, str) else None, stream,
                    SampleGroup() if params.best_of > 1 else None, problem)

    def add_beam_search_request(self, request_id: str, prompt: str | list[int], params: BeamSearchParams) -> None:
        """Queue a beam search (beam_search.py has the rule); its one output, once finished, has the best
        params.beam_width hypotheses in .outputs, best first."""
        if request_id in self._requests:
            raise ValueError(f"request_id {request_id!r} is already in the engine")
        # greedy and EOS-blind: the beams' tokens are chosen by the search, not by the sampler or stop rules
        sampling = SamplingParams(temperature=0.0, max_tokens=params.max_tokens, ignore_eos=True)
        seq = Sequence(request_id, self.encode(prompt), sampling)
        self._admit(seq, prompt if isinstance(prompt, str) else None, False,
                    SampleGroup(forked=True, beam=BeamState(params, live=[seq])))

    def _admit(self, seq: Sequence, text_prompt: str | None, stream: bool, group: SampleGroup | None,
               problem: str | None = None) -> None:
        """problem: why the request cannot run as asked, found by the caller (a prompt's own problems come first)."""
        error = self._reject_reason(seq) or problem
        if error is not None:
            seq.status, seq.finish_reason, seq.error = SequenceStatus.FINISHED, "error", error
            seq.finished_time = time.perf_counter()
            self.stats_counters.failed_requests += 1
            rejected = TrackedRequest(seq, text_prompt, stream, None, rejected=True)
            self._ready.append(self.output_processor.output(rejected))
            return
        request = self._requests[seq.request_id] = self.output_processor.track(seq, text_prompt, stream)
        if group is not None:
            group.members[seq] = request
            request.group = group
        self.stats_counters.requests += 1
        self.stats_counters.prompt_tokens += seq.num_prompt_tokens
        self.scheduler.add(seq)

    def _tracked(self, seq: Sequence) -> TrackedRequest | None:
        """The tracker of one sequence: its request's, or its own inside the request's group."""
        request = self._requests.get(seq.request_id)
        if request is None or request.group is None:
            return request
        return request.group.members.get(seq)

    def _reject_reason(self, seq: Sequence) -> str | None:
        n = seq.num_prompt_tokens
        if n == 0:
            return "empty prompt: nothing to condition on"
        if n > self.max_model_len:
            return f"prompt has {n} tokens, more than the model's context of {self.max_model_len}"
        if n > self.max_seq_len:
            return (f"prompt has {n} tokens, more than the whole KV cache holds "
                    f"({self.block_manager.num_blocks} blocks of {self.config.block_size})")
        if seq.logprobs_from is not None and not 1 <= seq.logprobs_from <= n:
            return f"log-probabilities asked from token {seq.logprobs_from} of a {n}-token prompt"
        ids = seq.token_ids + list(seq.next_token_candidates)
        if max(ids) >= self.spec.vocab_size or min(ids) < 0:
            return f"prompt has token ids outside the vocabulary (size {self.spec.vocab_size})"
        return None

    def abort_request(self, request_id: str) -> None:
        """Stop a request and free its blocks; unknown or finished ids are ignored (it may have just ended)."""
        request = self._requests.pop(request_id, None)
        if request is None:
            return
        now = time.perf_counter()
        for member in request.samples:
            if not member.seq.is_finished:
                self.scheduler.finish(member.seq)
                member.seq.finish_reason, member.seq.finished_time = "abort", now
        if request.seq.finish_reason is None:  # its first sequence ended (a dropped beam): the request was aborted
            request.seq.finish_reason, request.seq.finished_time = "abort", now
        self.stats_counters.aborted_requests += 1

    def has_unfinished_requests(self) -> bool:
        return bool(self._requests or self._ready)

    has_unfinished = has_unfinished_requests

    def stats(self) -> dict:
        self.stats_counters.model_time_s = self.runner.model_time_s
        return {**self.stats_counters.as_dict(), "max_model_len": self.max_model_len,
                "kv_blocks_free": self.block_manager.num_free_blocks}

    # -- one step -------------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Run one scheduled batch; return the outputs of requests that finished (and, for streamed
        requests, of those that gained tokens)."""
        outputs, self._ready = self._ready, []
        self.last_step_prompt_tokens = {}
        out = self.scheduler.schedule()
        if not out.scheduled:
            if self.scheduler.has_unfinished():
                raise RuntimeError("scheduler made no progress with requests waiting (engine bug)")
            return outputs
        try:
            self.runner.copy_blocks(out.blocks_to_copy)
            logits, row_positions, hidden_rows = self.runner.execute(out.scheduled)
        except Exception as error:  # noqa: BLE001 - the batch fails, the engine stays usable
            return outputs + self._fail_batch(out, error)
        try:
            self.scheduler.step_done(out)
            self.last_step_prompt_tokens = _prompt_tokens_in_cache(out)
            self.stats_counters.steps += 1
            self.stats_counters.batched_tokens += out.num_batched_tokens
            self.stats_counters.logits_rows += logits.shape[0]
            self._apply_logits(out, logits, row_positions, hidden_rows)
        except Exception as error:  # noqa: BLE001 - an engine bug after the model ran: this step's requests only
            log.exception("processing the step's logits failed")
            self._fail_unfinished(out, f"engine step failed: {type(error).__name__}: {error}")
        return outputs + self._step_outputs(out)

    def _step_outputs(self, out: SchedulerOutput) -> list[RequestOutput]:
        outputs = []
        for request_id in dict.fromkeys(item.seq.request_id for item in out.scheduled):  # samples share an id
            request = self._requests.get(request_id)
            if request is None:
                continue
            finished = request.finished
            if finished or (request.streams and request.has_new_tokens()):
                outputs.append(self._guarded_output(request))
            if finished:
                del self._requests[request_id]
        return outputs

    def _guarded_output(self, request: TrackedRequest) -> RequestOutput:
        try:
            return self.output_processor.output(request)
        except Exception as error:  # noqa: BLE001 - a text that cannot be decoded fails its own request only
            message = f"decoding the output failed: {type(error).__name__}: {error}"
            if request.finished:   # its blocks are already free; only the outcome changes
                for member in request.samples:
                    member.seq.finish_reason, member.seq.error = "error", message
                self.stats_counters.failed_requests += 1
            else:
                self._fail_request(request.seq, message)
            return self.output_processor.output(request, text="")

    def _fail_request(self, seq: Sequence, message: str) -> None:
        """End one request, all of its samples or beams, with an error and free its blocks; the rest of the batch
        goes on."""
        request = self._requests.get(seq.request_id)
        members = [tracked.seq for tracked in request.samples] if request is not None else [seq]
        if all(member.is_finished for member in members):
            return
        for member in members:
            if not member.is_finished:
                member.error = message
                self._finish(member, "error")
        self.stats_counters.failed_requests += 1

    def _fail_unfinished(self, out: SchedulerOutput, message: str) -> None:
        for item in out.scheduled:
            if item.seq.request_id in self._requests:
                self._fail_request(item.seq, message)

    def _fail_batch(self, out: SchedulerOutput, error: Exception) -> list[RequestOutput]:
        """The model raised (out of memory, a kernel error): every request of the step ends with the error
        and frees its blocks, including those registered for this step, so nobody waits on them."""
        failed = []
        for request_id in dict.fromkeys(item.seq.request_id for item in out.scheduled):
            request = self._requests[request_id]
            self._fail_request(request.seq, f"model step failed: {type(error).__name__}: {error}")
            del self._requests[request_id]
            failed.append(self.output_processor.output(request))
        return failed

    def _apply_logits(self, out: SchedulerOutput, logits: torch.Tensor, row_positions: list[list[int]],
                      hidden_rows: list[dict[int, torch.Tensor]] | None = None) -> None:
        sample_rows: list[int] = []
        sample_seqs: list[Sequence] = []
        beam_requests: dict[str, TrackedRequest] = {}
        row = 0
        for index, (item, positions) in enumerate(zip(out.scheduled, row_positions)):
            seq = item.seq
            rows = logits[row:row + len(positions)]
            row += len(positions)
            try:
                if hidden_rows is not None:
                    seq.hidden_rows.update(hidden_rows[index])  # a recompute overwrites, never duplicates
                self.output_processor.record_rows(item, positions, rows)
            except Exception as error:  # noqa: BLE001 - one request's bookkeeping must not fail the others
                self._fail_request(seq, f"reading the logits failed: {type(error).__name__}: {error}")
                continue
            if item.end != seq.num_tokens or seq.is_finished:
                continue
            request = self._requests[seq.request_id]
            group = request.group
            if group is not None and group.beam is not None and seq.wants_next_token:
                group.beam.proposals[seq] = proposals(rows[-1], group.beam.params.beam_width)
                beam_requests[seq.request_id] = request
                continue
            members = [seq]
            if group is not None and not group.forked:  # the first sample's prompt is done: all samples start
                self._fork_samples(request)
                members = [tracked.seq for tracked in request.samples]
            for member in members:
                if member.wants_next_token:
                    sample_rows.append(row - 1)
                    sample_seqs.append(member)
                else:
                    self._finish(member, "length")  # the prompt was all it asked for (max_tokens=0)
        if sample_seqs:
            self._sample_and_append(logits[sample_rows], sample_seqs)
        for request in beam_requests.values():
            if not request.finished and request.group.beam.ready():
                self._advance_beams(request)

    def _fork_samples(self, request: TrackedRequest) -> None:
        """The request's first sequence computed its prompt: its other samples start from there, sharing its blocks
        (sample i draws from a generator seeded with sample_seed(seed, i)) and its last logits row."""
        parent, group = request.seq, request.group
        children = [parent.fork(i, make_generator(parent.params, torch.device("cpu"), i))
                    for i in range(1, parent.params.best_of)]
        for child in children:
            self._track_member(request, child)
        self.scheduler.fork(parent, children)
        group.forked = True

    def _track_member(self, request: TrackedRequest, child: Sequence) -> None:
        """A forked sample or beam joins its request's group, tracked (text, stop strings) like a request."""
        tracked = self.output_processor.track(child, request.prompt, request.stream)
        tracked.group = request.group
        request.group.members[child] = tracked

    def _sample_and_append(self, logits: torch.Tensor, seqs: list[Sequence]) -> None:
        """Sample every row, then give each request its token; a request whose row could not be sampled, or whose
        token could not be processed, fails alone."""
        tokens = sample(logits, [s.params for s in seqs], [s.generator for s in seqs])
        now = time.perf_counter()
        logprob_rows = self.output_processor.sampled_logprob_rows(logits, seqs, tokens)
        for i, (seq, token) in enumerate(zip(seqs, tokens)):
            if isinstance(token, SamplingError):
                self._fail_request(seq, str(token))
                continue
            if seq.is_finished:
                continue  # a sibling sample failed this step, and the request with it
            try:
                if i in logprob_rows:
                    self.output_processor.record_sampled_logprobs(seq, logprob_rows[i], token)
                self._append_token(seq, token, now)
            except Exception as error:  # noqa: BLE001 - e.g. a detokenizer error: this request only
                self._fail_request(seq, f"processing token {token} failed: {type(error).__name__}: {error}")

    def _append_token(self, seq: Sequence, token: int, now: float) -> None:
        seq.token_ids.append(token)
        if seq.first_token_time is None:
            seq.first_token_time = now
        self.stats_counters.generated_tokens += 1
        tracked = self._tracked(seq)
        if tracked.group is not None:
            tracked.group.generated_tokens += 1
        reason = self.output_processor.stop_reason(tracked, token)
        if reason is not None:
            self._finish(seq, reason)

    def _advance_beams(self, request: TrackedRequest) -> None:
        """One round of beam search, once every live beam has proposed: beams kept once continue, beams kept
        several times are forked, the others are freed."""
        group, beam = request.group, request.group.beam
        kept = beam.plan_round(self.eos_token_ids)
        continuing: list[Sequence] = []
        taken: set[int] = set()
        for c in kept:  # forks copy their parent before any parent takes its own token
            parent = beam.live[c.beam]
            if c.beam in taken:
                child = parent.fork(len(group.members), None)
                self._track_member(request, child)   # a beam search request never streams
                self.scheduler.fork(parent, [child])
                continuing.append(child)
            else:
                taken.add(c.beam)
                continuing.append(parent)
        for index, seq in enumerate(beam.live):
            if index not in taken:  # dropped: its blocks go back (those its forks share stay theirs)
                self.scheduler.finish(seq)
                del group.members[seq]
        now = time.perf_counter()
        for seq, c in zip(continuing, kept):
            seq.token_ids.append(c.token)
            seq.cumulative_logprob = c.cumulative_logprob
            seq.first_token_time = seq.first_token_time or now
        self.stats_counters.generated_tokens += len(kept)
        group.generated_tokens += len(kept)
        if beam.end_round(continuing, self.max_seq_len):
            for seq in continuing:
                self._finish(seq, "length")
            if not continuing:
                self.stats_counters.finished_requests += 1

    def _finish(self, seq: Sequence, reason: str) -> None:
        seq.finish_reason = reason
        seq.finished_time = time.perf_counter()
        self.scheduler.finish(seq)
        request = self._requests.get(seq.request_id)
        if request is None or request.finished:  # the request's last sample or beam
            self.stats_counters.finished_requests += 1


def _prompt_tokens_in_cache(out: SchedulerOutput) -> dict[str, int]:
    """Request id -> prompt tokens in the cache after the step, for the step's sequences still in their prompt
    (one item per scheduled sequence: no per-token work)."""
    return {item.seq.request_id: min(item.end, item.seq.num_prompt_tokens)
            for item in out.scheduled if item.start < item.seq.num_prompt_tokens}


def _backend_option(config: EngineConfig) -> dict:
    return {} if config.attention_backend is None else {"attention_backend": config.attention_backend}
