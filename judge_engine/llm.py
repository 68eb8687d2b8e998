"""LLM: the offline API of SPEC section 4 (generate, score, stats), driving an LLMEngine to completion.

Like the engine under it, an LLM is driven by one thread at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence as SequenceABC
from pathlib import Path

from judge_engine.config import EngineConfig
from judge_engine.engine import LLMEngine
from judge_engine.outputs import RequestOutput, ScoreError
from judge_engine.sampler import SamplingParams

__all__ = ["LLM", "LLMEngine", "ScoreError"]

Prompt = str | list[int]


class LLM:
    def __init__(self, model: str | Path | None = None, **options) -> None:
        """model: None for the embedded SmolLM2-135M-Instruct, a local HF folder or a .gguf file.
        options: the fields of EngineConfig (dtype, device, block_size, max_num_seqs, max_num_batched_tokens,
        kv_cache_bytes, enable_prefix_caching, attention_backend, gpu_memory_utilization, max_model_len)."""
        self.engine = LLMEngine(EngineConfig(model=model, **options))
        self._ids = itertools.count()

    @property
    def tokenizer(self):
        return self.engine.tokenizer

    @property
    def model_path(self) -> Path:
        return self.engine.model_path

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
        ids = [self._add(prompt, p) for prompt, p in zip(prompts, params)]
        finished = self._run(set(ids))
        return [finished[i] for i in ids]

    def score(self, prompts: Prompt | list[Prompt], choices: list[str]) -> list[list[float] | ScoreError]:
        """lps[i][j] = log P(choices[j] | prompts[i]), summed over the choice's tokens.

        Each choice is tokenized on its own (no special tokens) and appended to the prompt's ids, so the
        prompt/choice boundary never merges tokens. One sequence per prompt gives every choice's first token
        from its last row; a choice of several tokens adds a prompt+choice sequence whose prompt blocks come
        from the prefix cache (only the prompt's last partial block and the choice are computed). Everything
        goes through one batch. A prompt that cannot be scored gets a ScoreError in its place; if every prompt
        fails, the first ScoreError is raised instead."""
        prompts = _as_prompt_list(prompts)
        if not choices:
            raise ValueError("choices: expected at least one choice")
        choice_ids = [self.tokenizer.encode(c, add_special_tokens=False) for c in choices]
        empty = [c for c, ids in zip(choices, choice_ids) if not ids]
        if empty:
            raise ValueError(f"choices: {empty[0]!r} has no tokens")
        first_tokens = tuple(sorted({ids[0] for ids in choice_ids}))
        params = SamplingParams(max_tokens=0)
        plans: list[tuple[str, list[str | None], int] | None] = []
        for prompt in prompts:
            prompt_ids = self.engine.encode(prompt)
            if not prompt_ids:
                plans.append(None)
                continue
            head = self._add(prompt_ids, params, next_token_candidates=first_tokens)
            tails = [self._add(prompt_ids + ids, params, logprobs_from=len(prompt_ids) + 1) if len(ids) > 1
                     else None for ids in choice_ids]
            plans.append((head, tails, len(prompt_ids)))
        wanted = {rid for plan in plans if plan for rid in [plan[0], *plan[1]] if rid is not None}
        finished = self._run(wanted)
        results = [self._score_row(i, plan, finished, choice_ids) for i, plan in enumerate(plans)]
        if results and all(isinstance(r, ScoreError) for r in results):
            raise results[0]
        return results

    @staticmethod
    def _score_row(index: int, plan, finished: dict[str, RequestOutput],
                   choice_ids: list[list[int]]) -> list[float] | ScoreError:
        if plan is None:
            return ScoreError(index, "empty prompt: nothing to condition on")
        head_id, tail_ids, prompt_len = plan
        head = finished[head_id]
        if head.error is not None:
            return ScoreError(index, head.error)
        row: list[float] = []
        for ids, tail_id in zip(choice_ids, tail_ids):
            value = head.next_token_logprobs[ids[0]]
            if tail_id is not None:
                tail = finished[tail_id]
                if tail.error is not None:
                    return ScoreError(index, tail.error)
                value += sum(entry[token] for entry, token in
                             zip(tail.prompt_logprobs[prompt_len + 1:], tail.prompt_token_ids[prompt_len + 1:]))
            row.append(value)
        return row

    def _add(self, prompt: Prompt, params: SamplingParams, **scoring) -> str:
        request_id = f"llm-{next(self._ids)}"
        self.engine.add_request(request_id, prompt, params, stream=False, **scoring)
        return request_id

    def _run(self, request_ids: set[str]) -> dict[str, RequestOutput]:
        finished: dict[str, RequestOutput] = {}
        while len(finished) < len(request_ids):
            for out in self.engine.step():
                if out.finished and out.request_id in request_ids:
                    finished[out.request_id] = out
        return finished


def _as_prompt_list(prompts) -> list[Prompt]:
    if isinstance(prompts, str):
        return [prompts]
    if isinstance(prompts, SequenceABC) and prompts and all(isinstance(t, int) for t in prompts):
        return [list(prompts)]  # one prompt given as token ids
    return list(prompts)
