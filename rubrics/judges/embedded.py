"""EmbeddedJudge: judge requests answered by the in-process judge_engine (SmolLM2-135M-Instruct by default).

One call to judge() is one engine batch: every prompt of every trajectory goes to the engine together, ordered
trajectory by trajectory, so the prefix cache computes the shared instructions once and each trajectory's
evidence once. Verdicts come from log-probabilities, never from parsing generated text:

- choice: P(met) = softmax over the scores of the answers "Yes" and "No";
- likelihood: pointwise mutual information of the item written as a statement, evidence against content-free
  evidence, mapped to a probability (rubrics/judges/likelihood.py).

Reasoned mode first generates a short greedy rationale, then scores Yes/No after it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rubrics.judges import likelihood
from rubrics.judges.prompt_ids import BuiltPrompt, PromptBuilder, PromptError
from rubrics.judges.prompts import CHOICE, LIKELIHOOD, METHODS
from rubrics.judges.protocol import JudgeRequest, Verdict

# Chosen by `rubric judge-eval` on the shipped labeled sets (see README, "Judge"): the method with the better
# balanced accuracy for the embedded model.
DEFAULT_METHOD = LIKELIHOOD
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"


class EmbeddedJudge:
    """rubrics.EmbeddedJudge(model=None, **engine_options): the judge of `rubric grade --judge embedded`.

    method: the verdict method for items that name none ("choice" or "likelihood").
    likelihood_scale / likelihood_offset: the calibration of the likelihood method (fitted defaults).
    llm: an already loaded judge_engine.LLM to share (tests, benchmarks); engine_options go to LLM otherwise.
    """

    def __init__(self, model: str | None = None, *, method: str | None = None,
                 likelihood_scale: float = likelihood.SCALE, likelihood_offset: float = likelihood.OFFSET,
                 llm: Any = None, **engine_options: Any):
        method = method or DEFAULT_METHOD
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        self.model = model
        self.method = method
        self.scale = likelihood_scale
        self.offset = likelihood_offset
        self.engine_options = engine_options
        self._llm = llm
        self._builder: PromptBuilder | None = None
        self.name = f"embedded:{model or EMBEDDED_MODEL_NAME}"
        self.last_cut_tokens = 0  # evidence tokens truncated in the last judge() call
        # progress(judgments done, judgments in the batch, engine stats), called while a batch runs (CLI bar);
        # a first call with 0 done says that the model is loaded and judging starts
        self.progress: Any = None

    @property
    def llm(self) -> Any:
        if self._llm is None:
            from judge_engine import LLM

            self._llm = LLM(model=self.model, **self.engine_options)
        return self._llm

    @property
    def builder(self) -> PromptBuilder:
        if self._builder is None:
            self._builder = PromptBuilder(self.llm.tokenizer, max_model_len(self.llm), self.method)
        return self._builder

    def stats(self) -> dict:
        """The engine's counters (prompt_tokens, computed_prompt_tokens, prefix_cache_hit_rate, ...)."""
        return self.llm.stats()

    def build_prompts(self, requests: Sequence[JudgeRequest]) -> list[BuiltPrompt | PromptError]:
        return self.builder.build(requests)

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        try:
            built = self.build_prompts(requests)
        except ImportError:
            raise  # a missing [engine] extra: the scorer turns it into an install hint on every item
        except Exception as exc:  # noqa: BLE001 - no engine or tokenizer: every item is an error, none raises
            reason = f"embedded judge unavailable: {type(exc).__name__}: {exc}"
            return [Verdict(met=None, probability=None, error=reason) for _ in requests]
        self.last_cut_tokens = sum(b.cut_tokens for b in built if isinstance(b, BuiltPrompt))
        if self.progress is not None:  # the model is ready: judging starts now (the CLI times it from here)
            self.progress(0, len(requests), self.llm.stats())
        rationales = self._rationales(requests, built)
        return self._verdicts(requests, built, rationales)

    # -- reasoned mode ------------------------------------------------------------------------------------
    def _rationales(self, requests: Sequence[JudgeRequest], built: list) -> dict[int, str | Exception]:
        from judge_engine import SamplingParams

        wanted = [i for i, (r, b) in enumerate(zip(requests, built))
                  if r.mode == "reasoned" and isinstance(b, BuiltPrompt)]
        if not wanted:
            return {}
        prompts = [built[i].ids for i in wanted]
        params = [SamplingParams(temperature=0.0, max_tokens=requests[i].max_tokens) for i in wanted]
        try:
            outputs = self.llm.generate(prompts, params)  # one batch, greedy
        except Exception as exc:  # noqa: BLE001 - reported on each reasoned item
            return {i: exc for i in wanted}
        tokenizer = self.llm.tokenizer
        rationales: dict[int, str | Exception] = {}
        for i, output in zip(wanted, outputs):
            if getattr(output, "error", None):
                rationales[i] = RuntimeError(output.error)
                continue
            rationales[i] = tokenizer.decode(list(output.token_ids), skip_special_tokens=True).strip()
        return rationales

    # -- scoring ------------------------------------------------------------------------------------------
    def _verdicts(self, requests: Sequence[JudgeRequest], built: list,
                  rationales: dict[int, str | Exception]) -> list[Verdict]:
        jobs: list[tuple[list[int], list[list[int]]]] = []
        weights: list[int] = []  # judgments each job completes (for the progress bar)
        slot: dict[tuple, int] = {}  # identical (prompt, choices) pairs are scored once (content-free baselines)

        def submit(prompt: list[int], choices: list[list[int]], weight: int = 1) -> int:
            key = (tuple(prompt), tuple(map(tuple, choices)))
            if key not in slot:
                slot[key] = len(jobs)
                jobs.append((prompt, choices))
                weights.append(0)
            weights[slot[key]] += weight
            return slot[key]

        plan: list[Any] = []
        for i, (request, prompt) in enumerate(zip(requests, built)):
            if isinstance(prompt, PromptError):
                plan.append(prompt.message)
            elif isinstance(rationales.get(i), Exception):
                plan.append(f"reasoned mode: rationale generation failed: {rationales[i]}")
            elif i in rationales:
                ids = prompt.ids + self.builder.follow_up(rationales[i])
                plan.append((CHOICE, submit(ids, prompt.choices), None, rationales[i]))
            elif prompt.method == LIKELIHOOD:
                baseline = submit(prompt.baseline, prompt.choices, weight=0)
                plan.append((LIKELIHOOD, submit(prompt.ids, prompt.choices), baseline, len(prompt.choices[0])))
            else:
                plan.append((CHOICE, submit(prompt.ids, prompt.choices), None, None))
        scores = score_jobs(self.llm, jobs, weights, self.progress)
        return [self._verdict(request, entry, scores) for request, entry in zip(requests, plan)]

    def _verdict(self, request: JudgeRequest, entry: Any, scores: list) -> Verdict:
        if isinstance(entry, str):
            return Verdict(met=None, probability=None, error=entry)
        method, main, baseline, extra = entry
        failure = next((scores[j] for j in (main, baseline) if j is not None and isinstance(scores[j], str)), None)
        if failure is not None:
            return Verdict(met=None, probability=None, error=f"engine could not score the prompt: {failure}")
        if method == LIKELIHOOD:
            pmi = likelihood.pmi_per_token(scores[main][0], scores[baseline][0], extra)
            probability = likelihood.probability(pmi, self.scale, self.offset)
            # What the verdict rests on, for `rubric grade --verbose` (there is no generated text to show).
            rationale = (f"likelihood p={probability:.3f} (threshold {request.threshold}): the evidence moves the "
                         f"item's statement by {pmi:+.3f} nats/token against content-free evidence")
        else:
            probability = choice_probability(scores[main])
            rationale = extra
        return Verdict(met=probability >= request.threshold, probability=probability, rationale=rationale)


def choice_probability(logprobs: Sequence[float]) -> float:
    """P(met) from the log-probabilities of (met answer, unmet answer), renormalised over the two."""
    met, unmet = logprobs[0], logprobs[1]
    top = max(met, unmet)
    return math.exp(met - top) / (math.exp(met - top) + math.exp(unmet - top))


def max_model_len(llm: Any) -> int:
    """The longest sequence the engine accepts: its context length, capped by what its KV cache holds."""
    engine = getattr(llm, "engine", llm)
    limits = [getattr(engine, name, None) for name in ("max_model_len", "max_seq_len")]
    limits = [value for value in limits if isinstance(value, int) and value > 0]
    if not limits:
        raise RuntimeError("the engine does not say its maximum model length (LLMEngine.max_model_len)")
    return min(limits)


def score_jobs(llm: Any, jobs: list[tuple[list[int], list[list[int]]]], weights: list[int],
               progress: Any = None) -> list[list[float] | str]:
    """All jobs in one LLM.score batch; each result is the choices' log-probabilities or the engine's reason.

    weights[i]: how many judgments job i completes, for progress(done, total, engine stats)."""
    if not jobs:
        return []
    from judge_engine import ScoreError

    total, done = sum(weights), 0

    def scored(index: int) -> None:
        nonlocal done
        done += weights[index]
        if progress is not None:
            progress(done, total, llm.stats())

    prompts = [prompt for prompt, _ in jobs]
    choices = [choice_ids for _, choice_ids in jobs]
    try:
        results = llm.score(prompts, choices, on_scored=scored)
    except ScoreError as exc:  # every job failed: LLM.score raises the first reason instead of returning them
        return [exc.message] * len(jobs)
    except Exception as exc:  # noqa: BLE001 - an engine failure mid-batch makes every item an error, none raises
        return [f"{type(exc).__name__}: {exc}"] * len(jobs)
    return [r.message if isinstance(r, ScoreError) else r for r in results]
