"""EmbeddedJudge: judge requests answered by the in-process judge_engine (a catalog model, or any local one).

One call to judge() is one engine batch: every prompt of every trajectory goes to the engine together, ordered
trajectory by trajectory, so the prefix cache computes the shared instructions once and each trajectory's
evidence once. Verdicts come from log-probabilities, never from parsing generated text: each request's method
(rubrics/judges/methods/) names the prompts it needs scored and turns their scores into a probability.
Reasoned mode first generates a short greedy rationale, then scores the answers after it; with `samples: k` it
draws k rationales instead (one engine request of n=k sharing the prompt's blocks) and averages the k verdicts'
probabilities (self-consistency). Each request travels as one JudgePrompt (rubrics/judges/prompt/judge_prompt.py):
made from the request and its method's specs, built to token ids, given its rationales, scored, then read by the
method; its token ids follow the rules in rubrics/judges/prompt/token_layout.py.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rubrics.judges.backend import FitRequest, JudgeBackend, KeyedRequest
from rubrics.judges.fitted.calibration_file import ModelIdentity
from rubrics.judges.fitted.judge_models import NO_QUANTIZATION, UNCATALOGUED_METHOD, JudgeModel, \
    default_quantization
from rubrics.judges.methods import Calibration, ScoredPrompt
from rubrics.judges.prompt.ids import PromptBuilder
from rubrics.judges.prompt.judge_prompt import JudgePrompt
from rubrics.judges.comparison import comparison_spec, comparison_verdict
from rubrics.judges.protocol import ComparisonRequest, JudgeRequest, Verdict
from rubrics.judges.usage import JudgeUsage


class EmbeddedJudge(JudgeBackend):
    """rubrics.EmbeddedJudge(model=None, **engine_options): the judge of `rubric grade --judge embedded`.

    model: a catalog name (`rubric model list`), a local .gguf file or HF folder; None: the default judge model
    ($RUBRICS_JUDGE_MODEL, else rubrics.judges.fitted.judge_models.DEFAULT_JUDGE_MODEL).
    method: the verdict method for items that name none (a name in rubrics.judges.methods.METHOD_NAMES); None: the
    model's own (rubrics.judges.fitted.judge_models.JUDGE_MODELS), choice for a model outside the catalog.
    calibration: a calibration file (`rubric judge-eval --fit-calibration --write`): its path or a loaded
    rubrics.judges.fitted.calibration_file.CalibrationFile; refused (CalibrationFileError) when made for another model,
    prompt layout of a method it covers, or (method given) another method. Without one, a catalog model uses the
    calibration shipped for it, and any other model the identity calibration (with an UncalibratedJudgeWarning).
    calibrations: {method name: Calibration} replacing those.
    head: a verdict head (`rubric judge-train`): its path or a loaded rubrics.judges.fitted.verdict_head.VerdictHead, for
    the head method; refused (HeadFileError) when trained for another model or prompt layout. Without one, a
    catalog model uses the head shipped for it, if it has one (rubrics/judges/fitted/heads/).
    Method, calibration, head, identity and cache keys are the JudgeBackend's (rubrics/judges/backend.py); this
    class scores the prompts, on judge_engine.
    llm: an already loaded judge_engine.LLM to share (tests, benchmarks); engine_options go to LLM otherwise.
    quantization (an engine option): "int8", "int8-weights", or "none" / None for float32 results; not given, the
    catalog model's own on the CPU (rubrics.judges.fitted.judge_models.JUDGE_MODELS: int8 for the default judge
    model, whose calibration is fitted so), float32 for any other model.
    sample_temperature, sample_seed: how reasoned items with `samples` above 1 draw their rationales (rationale i
    of a prompt uses seed sample_seed + i, so a prompt always gets the same rationales and verdict-cache entries
    stay true).
    """

    kind = "embedded"
    reads_hidden_states = True
    warns_uncalibrated = True
    sample_temperature: float = 0.7
    sample_seed: int = 0
    # judge() may run in several threads at once (rubrics.grading.batching gives it up to this many batches in flight):
    # the engine schedules a call that arrives while another runs next to it, step by step.
    concurrent_calls: int = 4

    def __init__(self, model: str | None = None, *, method: str | None = None, calibration: Any = None,
                 calibrations: Mapping[str, Calibration] | None = None, head: Any = None, llm: Any = None,
                 **engine_options: Any):
        from rubrics.judges.fitted.judge_models import default_judge_model

        self.model = model if model is not None or llm is not None else default_judge_model()
        self.engine_options = engine_options if llm is not None else with_quantization(self.model, engine_options)
        self._llm = llm
        self._lock = threading.RLock()   # loading the model, and the tokenizer (not made for concurrent use)
        self._builder: PromptBuilder | None = None
        self.last_cut_tokens = 0  # evidence tokens truncated in the last judge() call
        # progress(judgments done, judgments in the batch, engine stats[, work=fraction of the batch's prompt tokens
        # done]), called while a batch runs (CLI bar; work only where the callable takes it: call_progress); a
        # first call with 0 done says that the model is loaded and judging starts
        self.progress: Any = None
        self.set_up(FitRequest(method, calibration, calibrations, head))

    # -- what the JudgeBackend asks of its backend ------------------------------------------------------------
    def model_identity(self) -> ModelIdentity:
        """The judge model's name and the sha256 of its weights, without loading it: a catalog model's pinned
        digest; another .gguf, or an HF folder's safetensors, is hashed once (remembered by path, size and
        modification time)."""
        quantization = self.engine_options.get("quantization") if self._llm is None \
            else getattr(self._llm, "quantization", None)
        return replace(embedded_identity(self.model, self._llm), quantization=quantization or None)

    def model_label(self) -> str:
        """A catalog model by its own name, another by the path or name the user gave."""
        identity = self.identity()
        return identity.name if self.catalog_model is not None or self.model is None else self.model

    def default_method(self, known: JudgeModel | None, head: Any) -> str:
        """A catalog model's own method (its head where one fits, else its zero-shot one); choice otherwise."""
        return known.method_for(head is not None) if known is not None else UNCATALOGUED_METHOD

    @property
    def llm(self) -> Any:
        with self._lock:
            if self._llm is None:
                from judge_engine import LLM

                self._llm = LLM(model=self.model, **engine_defaults(self.engine_options))
            return self._llm

    @property
    def builder(self) -> PromptBuilder:
        with self._lock:
            if self._builder is None:
                self._builder = PromptBuilder(self.llm.tokenizer, self.llm.max_seq_len)
            return self._builder

    def stats(self) -> dict:
        """The engine's counters (prompt_tokens, computed_prompt_tokens, prefix_cache_hit_rate, ...)."""
        return self.llm.stats()

    def build_prompts(self, requests: Sequence[JudgeRequest]) -> list[JudgePrompt]:
        try:
            return self._build_prompts(requests)
        except ImportError:
            raise
        except Exception:  # noqa: BLE001 - one request broke the batch: each on its own, so only it errs
            if len(requests) == 1:
                raise
            self.builder   # no engine or tokenizer is every request's failure: raised here, as before
            return [self._build_alone(request) for request in requests]

    def _build_alone(self, request: JudgeRequest) -> JudgePrompt:
        try:
            return self._build_prompts([request])[0]
        except Exception as exc:  # noqa: BLE001 - reported on this request's items only
            planned = self._plan(request)
            planned.error = f"the judge could not build this prompt: {type(exc).__name__}: {exc}"
            return planned

    def _build_prompts(self, requests: Sequence[JudgeRequest]) -> list[JudgePrompt]:
        planned = [self._plan(request) for request in requests]
        with self._lock:
            self.builder.build(planned)
        return planned

    def _plan(self, request: JudgeRequest) -> JudgePrompt:
        try:
            method = self.method_for(request.item)
        except ValueError as exc:   # a request naming no registered method: its own error, not the batch's
            return JudgePrompt(request, [], self.methods.named(self.method), error=str(exc))
        return JudgePrompt(request, method.prompts(request.item), method)

    def key_shared(self) -> dict[str, Any]:
        """What every verdict of this judge depends on: the model's weights and config, and its numerics."""
        identity = self.identity()
        return {"weights_sha256": identity.weights_sha256,
                "config_sha256": model_config_sha256(self.llm.model_path),
                # bfloat16, int8, a GPU or the torch route of float32 products gives other probabilities
                "numerics": [self.llm.dtype, self.llm.device,
                             *([q] if (q := getattr(self.llm, "quantization", None)) else []),
                             *(["float_gemm"] if getattr(self.llm, "float32_kernel", False) else []),
                             # torch's flash attention and log_softmax give other probabilities on each SIMD width
                             *(["row_attention"] if getattr(self.llm, "softmax_kernels", False) else [])]}

    # -- two attempts side by side ---------------------------------------------------------------------------
    def compare(self, requests: Sequence[ComparisonRequest]) -> list[Verdict]:
        """Each pair's verdict: the probability that its first attempt meets the item better
        (rubrics/judges/comparison.py), every pair in one engine batch. Pairs that show the same attempt first
        share the prompt up to the second attempt, and the items of one pair share it up to the item, so the
        engine's prefix cache computes each once."""
        if not requests:
            return []
        try:
            built = self._build_comparisons(requests)
        except ImportError:
            raise
        except Exception as exc:  # noqa: BLE001 - no engine or tokenizer: every pair is an error, none raises
            reason = f"embedded judge unavailable: {type(exc).__name__}: {exc}"
            return [Verdict(met=None, probability=None, error=reason) for _ in requests]
        ready = [prompt for prompt in built if prompt.error is None]
        if self.progress is not None:
            call_progress(self.progress, 0, len(ready), self.llm.stats(), work=0.0)
        scores = iter(score_in_prefix_order(self.llm, [p.ids() for p in ready], [p.choices[-1] for p in ready],
                                            self.progress))
        verdicts = []
        for prompt in built:
            scored = None if prompt.error is not None else next(scores)
            if scored is None or isinstance(scored, str):
                error = prompt.error if scored is None else f"engine could not score the prompt: {scored}"
                verdicts.append(Verdict(met=None, probability=None, error=error))
            else:
                first, second = scored.logprobs
                verdicts.append(comparison_verdict(first, second, JudgeUsage.from_engine(scored.usage)))
        return verdicts

    def _build_comparisons(self, requests: Sequence[ComparisonRequest]) -> list[JudgePrompt]:
        wanted = [JudgePrompt(request, [comparison_spec(request.item)]) for request in requests]
        with self._lock:
            self.builder.build(wanted)
        return wanted

    def comparison_sent(self, requests: Sequence[ComparisonRequest]) -> list[dict[str, Any] | None]:
        """What a comparison's cache key says it scored: the exact token ids (None: a pair whose prompt cannot be
        built)."""
        return [None if prompt.error is not None else {"prompt": [prompt.ids(), [list(c) for c in prompt.choices[-1]]]}
                for prompt in self._build_comparisons(requests)]

    def key_sent(self, requests: Sequence[JudgeRequest]) -> list[KeyedRequest | None]:
        """What a verdict's cache key says it scored: the reasoned-mode budget (and sampling), and the exact token
        ids of every prompt and answer (None: a request whose prompts cannot be built)."""
        return [None if p.error is not None else KeyedRequest(p.method, {
            "reasoning": None if p.reasoning is None else [p.reasoning.max_tokens, p.reasoning.follow_up,
                                                            *self._sampling_key(p)],
            "prompts": [[p.ids(index), [list(c) for c in p.choices[index]]] for index in range(len(p.specs))]})
            for p in self.build_prompts(requests)]

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        try:
            planned = self.build_prompts(requests)
        except ImportError:
            raise  # a missing [engine] extra: the scorer turns it into an install hint on every item
        except Exception as exc:  # noqa: BLE001 - no engine or tokenizer: every item is an error, none raises
            reason = f"embedded judge unavailable: {type(exc).__name__}: {exc}"
            return [Verdict(met=None, probability=None, error=reason) for _ in requests]
        self.last_cut_tokens = sum(p.cut_tokens for p in planned)
        if self.progress is not None:  # the model is ready: judging starts now (the CLI times it from here)
            call_progress(self.progress, 0, len(requests), self.llm.stats(), work=0.0)
        self._generate_rationales(planned)
        return self._verdicts(planned)

    def _verdicts(self, planned: list[JudgePrompt]) -> list[Verdict]:
        """The built prompts (rationales drawn) scored in one batch, and their verdicts."""
        self._score(planned)
        return [self._verdict(p, self._scored_prompts(p)) for p in planned]

    def measure(self, requests: Sequence[JudgeRequest]) -> list[list[ScoredPrompt] | str]:
        """What each request's method measured, before it becomes a verdict: the scored prompts (one list per
        rationale drawn in reasoned mode, the first here), or why the request could not be judged. Training a
        verdict head reads the hidden states from here."""
        planned = self.build_prompts(requests)
        self._generate_rationales(planned)
        self._score(planned)
        measured = [self._scored_prompts(p) for p in planned]
        return [m if isinstance(m, str) else m[0] for m in measured]

    # -- reasoned mode ------------------------------------------------------------------------------------
    def _generate_rationales(self, planned: list[JudgePrompt]) -> None:
        from judge_engine import SamplingParams

        wanted = [p for p in planned if p.error is None and p.reasoning is not None]
        if not wanted:
            return
        params = []
        for p in wanted:
            max_tokens, samples = p.reasoning.max_tokens, p.request.item.samples
            params.append(SamplingParams(temperature=0.0, max_tokens=max_tokens) if samples == 1 else
                          SamplingParams(temperature=self.sample_temperature, max_tokens=max_tokens, n=samples,
                                         seed=self.sample_seed))
        try:
            outputs = self.llm.generate([p.ids() for p in wanted], params)  # one batch
        except Exception as exc:  # noqa: BLE001 - reported on each reasoned item
            outputs = [exc] * len(wanted)
        for p, output in zip(wanted, outputs):
            failure = output if isinstance(output, Exception) else getattr(output, "error", None)
            if failure:
                p.error = f"reasoned mode: rationale generation failed: {failure}"
            else:
                decode = self.llm.tokenizer.decode
                with self._lock:
                    p.rationales = [decode(list(c.token_ids), skip_special_tokens=True).strip()
                                    for c in output.outputs]
                p.usage += JudgeUsage.from_engine(output.usage)

    def _sampling_key(self, planned: JudgePrompt) -> list:
        """What else decides a reasoned verdict when it draws several rationales (nothing more with one)."""
        samples = planned.request.item.samples
        return [] if samples == 1 else [samples, self.sample_temperature, self.sample_seed]

    # -- scoring ------------------------------------------------------------------------------------------
    def _score(self, planned: list[JudgePrompt]) -> None:
        """Every prompt of every request in one engine batch; each JudgePrompt gets its scores (one row per
        rationale, one result per spec) and the usage of the engine work it was first to ask for."""
        ids: list[list[int]] = []
        choices: list[list[list[int]]] = []
        layers: list[tuple[int, ...]] = []
        weights: list[int] = []  # judgments each prompt sent completes (for the progress bar)
        first_asked: list[JudgePrompt] = []  # whose usage a sent prompt's tokens count in (shared ones count once)
        slot: dict[tuple, int] = {}  # identical prompts are scored once (content-free baselines, panel members)
        rows: list[tuple[JudgePrompt, list[list[int]]]] = []   # per request: the sent slot of each rationale's specs

        def submit(prompt_ids: list[int], prompt_choices: list[list[int]], hidden: tuple[int, ...], weight: int,
                   asker: JudgePrompt) -> int:
            key = (tuple(prompt_ids), tuple(map(tuple, prompt_choices)), hidden)
            if key not in slot:
                slot[key] = len(ids)
                ids.append(prompt_ids)
                choices.append(prompt_choices)
                layers.append(hidden)
                weights.append(0)
                first_asked.append(asker)
            weights[slot[key]] += weight
            return slot[key]

        for p in planned:
            if p.error is not None:
                continue
            reasoning = p.reasoning
            rationales = (p.rationales or [""]) if reasoning is not None else [None]
            sent = []
            for number, rationale in enumerate(rationales, 1):   # the prompts once per rationale
                row = []
                for index, spec in enumerate(p.specs):
                    prompt_ids = p.ids(index)
                    if reasoning is not None:
                        with self._lock:
                            prompt_ids = prompt_ids + self.builder.follow_up(rationale, reasoning.follow_up)
                    last = index == len(p.specs) - 1 and number == len(rationales)
                    row.append(submit(prompt_ids, p.choices[index], spec.hidden_layers, 1 if last else 0, p))
                sent.append(row)
            rows.append((p, sent))
        scores = score_jobs(self.llm, ids, choices, layers, weights, self.progress)
        for asker, scored in zip(first_asked, scores):
            if not isinstance(scored, str):
                asker.usage += JudgeUsage.from_engine(scored.usage)
        for p, sent in rows:
            p.scores = [[scores[j] for j in row] for row in sent]

    def _scored_prompts(self, planned: JudgePrompt) -> list[list[ScoredPrompt]] | str:
        """The request's scored prompts, one list per rationale (one list outside reasoned mode), or its error."""
        if planned.error is not None:
            return planned.error
        failure = next((s for row in planned.scores for s in row if isinstance(s, str)), None)
        if failure is not None:
            return f"engine could not score the prompt: {failure}"
        return [[ScoredPrompt(tuple(scored.logprobs), tuple(map(len, choices)), rationale,
                              answer_position_states(scored))
                 for scored, choices in zip(row, planned.choices)]
                for row, rationale in zip(planned.scores, planned.rationales or [None])]

    def _verdict(self, planned: JudgePrompt, measured: list[list[ScoredPrompt]] | str) -> Verdict:
        if isinstance(measured, str):
            return Verdict(met=None, probability=None, error=measured, usage=planned.usage)
        item = planned.request.item
        verdicts = []
        for scored in measured:
            try:
                verdicts.append(planned.method.verdict(item, scored))
            except ValueError as exc:   # a head that does not fit the model's states: this item's error alone
                return Verdict(met=None, probability=None, error=str(exc), usage=planned.usage)
        if len(verdicts) == 1:
            return replace(verdicts[0], usage=planned.usage)
        # self-consistency: the rationales' mean probability decides; the first rationale is the one shown
        probability = sum(v.probability for v in verdicts) / len(verdicts)
        return replace(verdicts[0], met=probability >= item.threshold, probability=probability, usage=planned.usage)


# Prompt tokens per engine step on the CPU. The engine's own default (2,048) put the quickstart's whole batch (1,813
# computed tokens) into one step of 48 s on a 2-core AMD EPYC, so the progress bar sat at 0% until the end; in steps
# of 512 it moves four times, in the same time (48-66 s against 51-54 s, alternating) and with the same scores
# (a row's result never depends on its batch).
CPU_STEP_TOKENS = 512


def with_quantization(model: str | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """The engine options with the quantization the judge runs with: the one asked (NO_QUANTIZATION, "none", or
    None: float32 results), else the catalog model's default on the CPU (int8 for the default judge model), else
    none. The key is set either way, so the judge's identity, calibration and cache keys name the numerics."""
    options = dict(options)
    if "quantization" not in options:
        options["quantization"] = default_quantization(model, str(options.get("device", "cpu")))
    elif options["quantization"] == NO_QUANTIZATION:
        options["quantization"] = None
    return options


def engine_defaults(options: dict[str, Any]) -> dict[str, Any]:
    """The engine options the judge runs with: float32 activations unless asked (the shipped calibrations, the golden
    figures and the verdict cache assume them, and they give the same probabilities on every CPU, whatever the
    engine would pick for speed; int8 maps, the default judge model's, take float32 activations too), steps of
    CPU_STEP_TOKENS on the CPU, and the product's cache directory for the model unless given."""
    from rubrics.cache_dir import rubrics_cache_dir

    defaults: dict[str, Any] = {"dtype": "float32", "cache_dir": str(rubrics_cache_dir())}
    if str(options.get("device", "cpu")) == "cpu":
        defaults["max_num_batched_tokens"] = CPU_STEP_TOKENS
    return {**defaults, **options}


def embedded_identity(model: str | None, llm: Any = None) -> ModelIdentity:
    """ModelIdentity of the weights `model` names (None: the engine's default model), or of those llm loaded."""
    from judge_engine import model_identity

    from rubrics.cache_dir import rubrics_cache_dir

    name, digest = model_identity(model, rubrics_cache_dir(), resolved=llm.model_path if llm is not None else None)
    return ModelIdentity(name, digest)


def model_config_sha256(path: Any) -> str | None:
    """An HF folder's config.json digest (the same weights under another config compute other probabilities);
    None for a .gguf, whose digest covers its config already."""
    import hashlib
    from pathlib import Path

    config = Path(path) / "config.json"
    return hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else None


def answer_position_states(scored: Any) -> Any:
    """[layers, hidden size] at the prompt's last token (the only position the judge asks), None when none asked."""
    states = getattr(scored, "hidden_states", None)
    return None if states is None else states[0]


def score_in_prefix_order(llm: Any, prompts: list[list[int]], choices: list[list[list[int]]],
                          progress: Any = None) -> list[Any]:
    """score_jobs with the prompts sent in the order of their token ids, so that prompts sharing a prefix run one
    after the other while its blocks are still in the KV cache (the comparisons of a group come item by item, and
    the same pair's other items, or the same first attempt's other pairs, would otherwise arrive after a small CPU
    cache had evicted them); the results come back in the prompts' order."""
    order = sorted(range(len(prompts)), key=lambda index: prompts[index])
    scored = score_jobs(llm, [prompts[i] for i in order], [choices[i] for i in order], [()] * len(prompts),
                        [1] * len(prompts), progress)
    results: list[Any] = [None] * len(prompts)
    for index, result in zip(order, scored):
        results[index] = result
    return results


def score_jobs(llm: Any, prompts: list[list[int]], choices: list[list[list[int]]], layers: list[tuple[int, ...]],
               weights: list[int], progress: Any = None) -> list[Any]:
    """All prompts (their choices, the hidden layers asked at their last token) in one LLM.score batch; each result
    is a judge_engine Scored (the choices' log-probabilities and the tokens it cost) or the engine's reason (a str).

    weights[i]: how many judgments prompt i completes, for progress (BatchProgress says what it hears)."""
    if not prompts:
        return []
    report = BatchProgress(progress, llm, sum(weights), sum(map(len, prompts)))
    results: list[Any] = [None] * len(prompts)
    groups: dict[tuple[int, ...], list[int]] = {}   # one engine call per set of hidden layers asked (mostly one)
    for index, asked in enumerate(layers):
        groups.setdefault(asked, []).append(index)
    for asked, indexes in groups.items():
        share = sum(len(prompts[i]) for i in indexes)
        scored = _score_group(llm, [prompts[i] for i in indexes], [choices[i] for i in indexes], asked,
                              lambda i, indexes=indexes: report.scored(weights[indexes[i]]), report.on_prefill(share))
        for index, result in zip(indexes, scored):
            results[index] = result
        report.call_over(share)
    return results


@dataclass
class BatchProgress:
    """What score_jobs tells progress: progress(judgments done, judgments of the batch, engine stats, work=...) as
    each job is scored, and, since the engine computes every prompt of the batch together (they all finish near
    its end), as its prefill advances too: work is the fraction of the batch's prompt tokens done (computed, or
    served by the prefix cache), from the engine's on_prefill. A progress that does not take work (written for
    progress(done, total, stats)) hears of scored jobs only, as before."""
    progress: Callable[..., None] | None
    llm: Any
    total: int            # judgments of the batch
    tokens: int           # prompt tokens of the batch's jobs, to weigh its engine calls
    done: int = 0
    tokens_before: int = 0   # tokens of the engine calls already over (one per set of hidden layers asked)
    work: float = 0.0
    with_work: bool = field(init=False)

    def __post_init__(self) -> None:
        self.with_work = self.progress is not None and takes_work(self.progress)

    def scored(self, weight: int) -> None:
        self.done += weight
        self.report()

    def on_prefill(self, share: int) -> Callable[[int, int], None] | None:
        """The engine's on_prefill for the call over `share` of the batch's tokens (None: nobody to tell)."""
        if not self.with_work:
            return None

        def prefilled(done: int, total: int) -> None:
            self.work = min((self.tokens_before + share * done / max(total, 1)) / max(self.tokens, 1), 1.0)
            self.report()
        return prefilled

    def call_over(self, share: int) -> None:
        self.tokens_before += share

    def report(self) -> None:
        if self.progress is not None:
            call_progress(self.progress, self.done, self.total, self.llm.stats(), self.work)


def call_progress(progress: Callable[..., None], done: int, total: int, stats: dict, work: float) -> None:
    """progress(done, total, stats, work=work), or progress(done, total, stats) for one that does not take work."""
    if takes_work(progress):
        progress(done, total, stats, work=work)
    else:
        progress(done, total, stats)


def takes_work(progress: Callable[..., None]) -> bool:
    """Whether a progress callable takes the work keyword (or any keyword): one written for progress(done, total,
    stats) alone keeps working, without it."""
    try:
        parameters = inspect.signature(progress).parameters.values()
    except (TypeError, ValueError):   # a builtin or C callable without a signature: the old protocol is safe
        return False
    return any((p.name == "work" and p.kind is not p.POSITIONAL_ONLY) or p.kind is p.VAR_KEYWORD for p in parameters)


def _score_group(llm: Any, prompts: list[list[int]], choices: list[list[list[int]]], layers: tuple[int, ...],
                 on_scored: Any, on_prefill: Any = None) -> list[Any]:
    from judge_engine import ScoreError

    # keywords only when used, so that a stand-in LLM written for the plainer call (tests, a user's) still fits
    options = {**({"hidden_layers": layers} if layers else {}), **({"on_prefill": on_prefill} if on_prefill else {})}
    try:
        results = llm.score_with_usage([list(p) for p in prompts], [[list(c) for c in cs] for cs in choices],
                                       on_scored=on_scored, **options)
    except ScoreError as exc:  # every job failed: LLM.score raises the first reason instead of returning them
        return [exc.message] * len(prompts)
    except Exception as exc:  # noqa: BLE001 - an engine failure mid-batch makes every item an error, none raises
        return [f"{type(exc).__name__}: {exc}"] * len(prompts)
    return [r.message if isinstance(r, ScoreError) else r for r in results]
