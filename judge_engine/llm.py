"""LLM: the offline engine API (generate, score, stats; documented in docs/engine.md), driving an LLMEngine to
completion.

An LLM may be called from several threads at once: their requests join the same engine batches (step_sharing.py),
so a call made while another runs is served next to it instead of after it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from pathlib import Path

from judge_engine.engine.beam_search import BeamSearchParams
from judge_engine.config import EngineConfig
from judge_engine.engine.llm_engine import LLMEngine
from judge_engine.outputs import RequestOutput, Scored, ScoreError, TokenUsage
from judge_engine.engine.sampler import SamplingParams
from judge_engine.engine.sequence import resolve_hidden_layers, resolve_hidden_positions
from judge_engine.engine.step_sharing import StepSharing, Waiter

__all__ = ["LLM", "LLMEngine", "ScoreError"]

Prompt = str | list[int]
Choice = str | list[int]
OnPrefill = Callable[[int, int], None]   # (prompt tokens done, prompt tokens of the call)


@dataclass
class _ScorePlan:
    head: str | None          # the prompt alone: its last row gives each choice's first token (None: one choice)
    tails: list[str | None]   # per choice of 2+ tokens: prompt + choice, for the tokens the head does not give
    prompt_len: int
    choice_ids: list[list[int]]
    hidden_from: str | None = None  # the request that keeps the hidden states asked for (the head, else the tail)

    def prompt_tokens(self) -> dict[str, int]:
        """Request id -> its prompt tokens: the prompt alone for the head, prompt + choice for a tail."""
        tokens = {self.head: self.prompt_len} if self.head is not None else {}
        tokens.update({tail: self.prompt_len + len(ids) for tail, ids in zip(self.tails, self.choice_ids)
                       if tail is not None})
        return tokens

    def result(self, index: int, finished: dict[str, RequestOutput]) -> Scored | ScoreError:
        outputs = [finished[r] for r in [self.head, *self.tails] if r is not None]
        failed = next((output for output in outputs if output.error is not None), None)
        if failed is not None:
            return ScoreError(index, failed.error)
        head = finished[self.head] if self.head is not None else None
        row: list[float] = []
        for ids, tail_id in zip(self.choice_ids, self.tails):
            value = head.next_token_logprobs[ids[0]] if head is not None else 0.0
            if tail_id is not None:
                tail = finished[tail_id]
                start = self.prompt_len + (1 if head is not None else 0)
                value += sum(entry[token] for entry, token in
                             zip(tail.prompt_logprobs[start:], tail.prompt_token_ids[start:]))
            row.append(value)
        hidden = finished[self.hidden_from].hidden_states if self.hidden_from is not None else None
        return Scored(row, sum((output.usage for output in outputs), TokenUsage()), hidden)


@dataclass
class _PrefillWatch:
    """One score call's prompt tokens, done (computed, or served by the prefix cache) and in all, for on_prefill.

    Each request counts the most it ever had in the cache (a preempted request, recomputed, never takes the
    figure back) and all of its prompt once it finished (an error finishes it too)."""
    on_prefill: OnPrefill
    tokens: dict[str, int] = field(default_factory=dict)     # request id -> its prompt tokens
    counted: dict[str, int] = field(default_factory=dict)    # request id -> its tokens counted as done
    total: int = 0
    done: int = 0
    reported: int = 0

    def expect(self, tokens: dict[str, int]) -> None:
        """The call's requests, as they are added (before any step runs them)."""
        self.tokens.update(tokens)
        self.total += sum(tokens.values())

    def stepped(self, prompt_tokens: dict[str, int]) -> None:
        """After an engine step (LLMEngine.last_step_prompt_tokens: every request the step worked on, this call's
        and others')."""
        for request_id, in_cache in prompt_tokens.items():
            if request_id in self.tokens:
                self._advance(request_id, in_cache)
        self.report()

    def finished(self, request_id: str) -> None:
        self._advance(request_id, self.tokens[request_id])
        self.report()

    def report(self) -> None:
        if self.done > self.reported:
            self.reported = self.done
            self.on_prefill(self.done, self.total)

    def _advance(self, request_id: str, in_cache: int) -> None:
        before = self.counted.get(request_id, 0)
        now = min(in_cache, self.tokens[request_id])
        if now > before:
            self.counted[request_id] = now
            self.done += now - before


class LLM:
    def __init__(self, model: str | Path | None = None, **options) -> None:
        """model: None for the embedded SmolLM2-135M-Instruct, a local HF folder or a .gguf file.
        options: the fields of EngineConfig (dtype: None or "auto" picks what is fast on this hardware, else
        "float32" or "bfloat16"; device, block_size, max_num_seqs, max_num_batched_tokens, kv_cache_bytes,
        enable_prefix_caching, attention_backend, gpu_memory_utilization, max_model_len; cache_dir: where the
        embedded model and GGUF conversions are kept, default $JUDGE_ENGINE_CACHE or ~/.cache/judge_engine;
        quantization: None, "int8" for int8 linear maps on the CPU, or "int8-weights" for int8 weights times float
        activations; quantized once into cache_dir)."""
        self.engine = LLMEngine(EngineConfig(model=model, **options))
        self._ids = itertools.count()
        self._sharing = StepSharing(self.engine)

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def model_path(self) -> Path:
        return self.engine.model_path

    @property
    def dtype(self) -> str:
        """The weights' and activations' dtype ("float32" or "bfloat16")."""
        return self.engine.config.dtype

    @property
    def quantization(self) -> str | None:
        """None (float linear maps), "int8" (int8 linear maps, float32 activations) or "int8-weights" (int8 weights
        times float32 activations)."""
        return self.engine.config.quantization

    @property
    def device(self) -> str:
        """Where the model runs ("cpu" or "cuda")."""
        return self.engine.device.type

    @property
    def float32_kernel(self) -> bool:
        """Whether float32 products run through the engine's own CPU kernel (layers/float_gemm.py: the same bits on
        every CPU with AVX2 and FMA) rather than row tiles through torch's BLAS."""
        import torch

        from judge_engine.layers import float_gemm

        return self.device == "cpu" and float_gemm.multiplies(getattr(torch, self.dtype))

    @property
    def softmax_kernels(self) -> bool:
        """Whether attention and log-probabilities run through the engine's own CPU kernels (layers/attention/
        row_attention.py, layers/log_softmax.py: the same bits on every CPU with AVX2 and FMA) rather than torch's
        flash attention and log_softmax, whose exps depend on the CPU's SIMD width."""
        import torch

        from judge_engine.layers.attention import row_attention
        from judge_engine.layers.log_softmax import kernel as log_softmax_kernel

        return (self.device == "cpu" and log_softmax_kernel().function is not None
                and row_attention.serves_calls(getattr(torch, self.dtype), self.engine.spec.head_dim))

    @property
    def max_seq_len(self) -> int:
        """The most tokens one sequence may have here: the model's context, capped by what the KV cache holds."""
        return self.engine.max_seq_len

    @property
    def num_layers(self) -> int:
        """The model's decoder layers; hidden_layers of score_with_usage run from 0 (the embeddings) to this (the last
        layer's output after the final norm)."""
        return self.engine.spec.num_layers

    @property
    def max_model_len(self) -> int:
        """The most tokens one sequence (prompt + output) may have."""
        return self.engine.max_model_len

    def stats(self) -> dict:
        return self.engine.stats()

    def generate(self, prompts: Prompt | list[Prompt],
                 params: SamplingParams | list[SamplingParams] | None = None) -> list[RequestOutput]:
        """One finished RequestOutput per prompt, in order; a prompt that cannot run has finish_reason
        "error" and .error set, the others are unaffected."""
        prompts = _as_prompt_list(prompts)
        if params is None or isinstance(params, SamplingParams):
            params = [params or SamplingParams()] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"params: {len(params)} SamplingParams for {len(prompts)} prompts")
        with self._sharing.adding() as waiter:
            ids = [self._add(waiter, prompt, p) for prompt, p in zip(prompts, params)]
        finished = self._sharing.wait(waiter)
        return [finished[i] for i in ids]

    def beam_search(self, prompts: Prompt | list[Prompt], beam_width: int, max_tokens: int,
                    length_penalty: float = 1.0, ignore_eos: bool = False) -> list[RequestOutput]:
        """One finished RequestOutput per prompt whose .outputs are its best `beam_width` beams, best first (each
        with token_ids, text, cumulative_logprob and finish_reason "stop" at EOS or "length"); the rule is
        judge_engine/engine/beam_search.py's. All prompts' beams run in one batch, sharing their prompt's blocks."""
        prompts = _as_prompt_list(prompts)
        params = BeamSearchParams(beam_width, max_tokens, length_penalty, ignore_eos)
        ids = []
        with self._sharing.adding() as waiter:
            for prompt in prompts:
                ids.append(self._claim_id(waiter))
                self.engine.add_beam_search_request(ids[-1], prompt, params)
        finished = self._sharing.wait(waiter)
        return [finished[i] for i in ids]

    def score(self, prompts: Prompt | list[Prompt], choices: list[Choice] | list[list[Choice]],
              on_scored: Callable[[int], None] | None = None, *,
              on_prefill: OnPrefill | None = None) -> list[list[float] | ScoreError]:
        """lps[i][j] = log P(choice j | prompts[i]), summed over the choice's tokens (score_with_usage, without
        the usage; hidden states come from score_with_usage only)."""
        return [r if isinstance(r, ScoreError) else r.logprobs
                for r in self.score_with_usage(prompts, choices, on_scored, on_prefill=on_prefill)]

    def score_with_usage(self, prompts: Prompt | list[Prompt], choices: list[Choice] | list[list[Choice]],
                         on_scored: Callable[[int], None] | None = None, *,
                         on_prefill: OnPrefill | None = None,
                         hidden_layers: SequenceABC[int] = (),
                         hidden_positions: SequenceABC[int] = (-1,)) -> list[Scored | ScoreError]:
        """Scored(logprobs, usage, hidden_states) per prompt: logprobs[j] = log P(choice j | prompts[i]), summed over
        the choice's tokens; usage counts the prompt tokens of the prompt's sequences and those the prefix cache
        served.

        hidden_layers: also return the hidden states of these layers at the prompt positions hidden_positions, as
        Scored.hidden_states, float32 [len(hidden_positions), len(hidden_layers), hidden_size] in the order asked.
        Layers count as transformers' output_hidden_states: 0 = the embeddings' output, i = decoder layer i's,
        num_layers = the last layer's after the final norm; negative from the end (-1 = num_layers). Positions
        index the prompt's tokens, negative from its end; -1 (the default) is the last prompt token, whose row
        predicts each choice's first token. A layer out of range raises ValueError; a position out of range for a
        prompt gives that prompt a ScoreError. Asked positions are always computed (the prefix cache never serves
        them), and only the asked rows are kept.

        choices: one list shared by every prompt, or one list per prompt (len(choices) == len(prompts)); a
        choice is a string (tokenized on its own, without special tokens) or a list of token ids. Its ids are
        appended to the prompt's ids, so the prompt/choice boundary never merges tokens.
        One sequence of the prompt alone gives every choice's first token from its last row; a choice of
        several tokens adds a prompt+choice sequence whose prompt blocks come from the prefix cache (only the
        prompt's last partial block and the choice are computed); a single choice of several tokens is one
        prompt+choice sequence alone. Everything goes through one batch.
        A prompt that cannot be scored gets a ScoreError in its place (an exception that is also a value:
        str(e), e.message, e.prompt_index); if every prompt fails, the first ScoreError is raised instead.
        on_scored(i) is called as soon as prompt i's requests have all finished (progress reports).
        on_prefill(done, total) follows the prompts' tokens, since all prompts of a batch are computed together and
        finish near its end: total is the prompt tokens of the call's sequences (those of a prompt+choice sequence
        included), done how many of them are in the KV cache, computed or served by the prefix cache (counted when
        matched; a finished sequence counts all of its own). It is called after each engine step this call's thread
        runs and as each sequence finishes, only when done grew, and last with done == total. Both callbacks run in
        the caller's thread, outside the engine's lock."""
        prompts = _as_prompt_list(prompts)
        owner: dict[str, int] = {}   # request id -> index of the prompt it scores
        remaining: Counter = Counter()
        watch = _PrefillWatch(on_prefill) if on_prefill is not None else None

        def request_done(request_id: str) -> None:
            if watch is not None:
                watch.finished(request_id)
            remaining[owner[request_id]] -= 1
            if remaining[owner[request_id]] == 0 and on_scored is not None:
                on_scored(owner[request_id])

        layers = resolve_hidden_layers(hidden_layers, self.engine.spec.num_layers)
        if layers and not hidden_positions:
            raise ValueError("hidden_positions: expected at least one prompt position for hidden_layers")
        with self._sharing.adding(request_done, watch.stepped if watch is not None else None) as waiter:
            plans = self._add_score_plans(waiter, prompts, self._choice_sets(choices, len(prompts)),
                                          layers, hidden_positions)
            owner.update({rid: i for i, plan in enumerate(plans) if isinstance(plan, _ScorePlan)
                          for rid in [plan.head, *plan.tails] if rid is not None})
            remaining.update(owner.values())
            if watch is not None:
                for plan in plans:
                    if isinstance(plan, _ScorePlan):
                        watch.expect(plan.prompt_tokens())
        finished = self._sharing.wait(waiter)
        results = [plan if isinstance(plan, ScoreError) else plan.result(i, finished)
                   for i, plan in enumerate(plans)]
        if results and all(isinstance(r, ScoreError) for r in results):
            raise results[0]
        return results

    def _add_score_plans(self, waiter: Waiter, prompts: list[Prompt], choice_sets: list[list[list[int]]],
                         hidden_layers: tuple[int, ...] = (),
                         hidden_positions: SequenceABC[int] = ()) -> list[_ScorePlan | ScoreError]:
        params = SamplingParams(max_tokens=0)
        plans: list[_ScorePlan | ScoreError] = []
        for index, (prompt, choice_ids) in enumerate(zip(prompts, choice_sets)):
            prompt_ids = self.engine.encode(prompt)
            problem = _choice_problem(choice_ids) or ("" if prompt_ids else "empty prompt: nothing to condition on")
            hidden = {}
            if not problem and hidden_layers:
                try:  # positions of the prompt itself, resolved before a tail appends its choice
                    hidden = {"hidden_layers": hidden_layers,
                              "hidden_positions": resolve_hidden_positions(hidden_positions, len(prompt_ids))}
                except ValueError as error:
                    problem = str(error)
            if problem:
                plans.append(ScoreError(index, problem))
                continue
            # The prompt-alone sequence shares the first-token row between choices; a single choice of several
            # tokens (a statement) has nothing to share, and its own sequence gives all of its tokens (and the
            # prompt's hidden states).
            head = None
            if len(choice_ids) > 1 or len(choice_ids[0]) == 1:
                first_tokens = tuple(sorted({ids[0] for ids in choice_ids}))
                head = self._add(waiter, prompt_ids, params, next_token_candidates=first_tokens, **hidden)
            tails_from = len(prompt_ids) + (1 if head is not None else 0)
            tails = [self._add(waiter, prompt_ids + ids, params, logprobs_from=tails_from,
                               **(hidden if head is None else {})) if len(ids) > 1
                     else None for ids in choice_ids]
            hidden_from = (head if head is not None else tails[0]) if hidden else None
            plans.append(_ScorePlan(head, tails, len(prompt_ids), choice_ids, hidden_from))
        return plans

    def _choice_sets(self, choices, num_prompts: int) -> list[list[list[int]]]:
        if not choices:
            raise ValueError("choices: expected at least one choice")
        if all(_is_choice(c) for c in choices):
            shared = [self._choice_ids(c) for c in choices]
            problem = _choice_problem(shared)
            if problem:
                raise ValueError(f"choices: {problem}")
            return [shared] * num_prompts
        if len(choices) == num_prompts and all(isinstance(cs, (list, tuple)) and all(_is_choice(c) for c in cs)
                                               for cs in choices):
            return [[self._choice_ids(c) for c in cs] for cs in choices]
        raise ValueError("choices: expected a list of choices (strings or token-id lists) shared by all "
                         f"prompts, or one such list per prompt ({num_prompts} prompts)")

    def _choice_ids(self, choice: Choice) -> list[int]:
        if isinstance(choice, str):
            return self.tokenizer.encode(choice, add_special_tokens=False)
        return [int(t) for t in choice]

    def _add(self, waiter: Waiter, prompt: Prompt, params: SamplingParams, **scoring) -> str:
        request_id = self._claim_id(waiter)
        self.engine.add_request(request_id, prompt, params, stream=False, **scoring)
        return request_id

    def _claim_id(self, waiter: Waiter) -> str:
        """A fresh request id, claimed by the waiter (a request whose adding fails is aborted, unknown or not)."""
        request_id = f"llm-{next(self._ids)}"
        waiter.request_ids.add(request_id)
        return request_id


def _is_choice(choice) -> bool:
    return isinstance(choice, str) or (isinstance(choice, (list, tuple))
                                       and all(isinstance(t, int) and not isinstance(t, bool) for t in choice))


def _choice_problem(choice_ids: list[list[int]]) -> str:
    if not choice_ids:
        return "no choices to score"
    if any(not ids for ids in choice_ids):
        return "a choice has no tokens"
    return ""


def _as_prompt_list(prompts) -> list[Prompt]:
    if isinstance(prompts, str):
        return [prompts]
    if isinstance(prompts, SequenceABC) and prompts and all(isinstance(t, int) for t in prompts):
        return [list(prompts)]  # one prompt given as token ids
    return list(prompts)
