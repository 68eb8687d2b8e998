"""OpenAIJudge: the judge on any OpenAI-compatible server (vLLM, SGLang, llama.cpp server, `rubric serve`).

It sends the same prompt layout as the embedded judge (rubrics/judges/prompt/prompts.py): one system turn that every
request shares, then one user turn that starts with the trajectory's context and ends with the item, so a
server with automatic prefix caching computes each trajectory's context once. Requests for one trajectory are
sent next to each other for the same reason.

It runs the methods that a chat server can run (`over_http`, rubrics/judges/methods/): the answers'
log-probabilities are read from the first answer token's top log-probabilities and the method turns them into a
probability, with the same calibration as on the embedded judge. A server that returns no log-probabilities gets
a strictly parsed one-word answer instead (probability 1 or 0); a server that gives neither, or a call that
still fails after its retries, gives an error verdict, never a silent unmet.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from rubrics.judges.prompt import prompts
from rubrics.judges.backend import FitRequest, JudgeBackend, KeyedRequest
from rubrics.judges.fitted.calibration_file import CalibrationFileError, ModelIdentity
from rubrics.judges.fitted.fitted_file import FittedFileError
from rubrics.judges.fitted.judge_models import JudgeModel
from rubrics.judges.methods import DEFAULT_HTTP_METHOD, METHOD_CLASSES, Calibration, JudgeMethod, PromptSpec, \
    ScoredPrompt, make_method, method_name_for
from rubrics.judges.backends.openai_http import JudgeHTTPError, RetryPolicy, get_json, post_json
from rubrics.judges.comparison import ANSWERS, comparison_spec, comparison_verdict
from rubrics.judges.protocol import ComparisonRequest, JudgeItem, JudgeRequest, Verdict
from rubrics.judges.usage import JudgeUsage

API_KEY_VARIABLES = ("RUBRICS_OPENAI_API_KEY", "OPENAI_API_KEY")
# OpenAI and vLLM cap top_logprobs at 20; more would be rejected by some servers.
TOP_LOGPROBS = 20
T = TypeVar("T")


class JudgeAnswerError(ValueError):
    """The server answered, but with nothing a verdict can be read from."""


def api_key_from_environment() -> str | None:
    for name in API_KEY_VARIABLES:
        if os.environ.get(name):
            return os.environ[name]
    return None


def chat_completions_url(base_url: str) -> str:
    """`http://host:8000` and `http://host:8000/v1` both mean the server's /v1/chat/completions."""
    base = base_url.rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"base_url: expected an http(s) URL such as http://127.0.0.1:8000/v1, got {base_url!r}")
    if not parts.path:
        base += "/v1"
    return base + "/chat/completions"


class OpenAIJudge(JudgeBackend):
    """`rubrics.OpenAIJudge(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B")`.

    concurrency bounds the requests in flight; timeout is each judge call's deadline in seconds, retries and
    backoff included; max_retries counts the retries after the first attempt (429, 5xx, connection errors).
    method: the verdict method for items that name none (one a chat server can run); calibration: a calibration
    file (path or CalibrationFile, rubrics/judges/fitted/calibration_file.py), refused when made for another model (the
    served model's name: a server does not say its weights' hash), prompt layout or (method given) method; without
    model= the name is checked once the server has named its model, and a mismatch makes every verdict an error.
    Without a file, a catalog model served under its own name (as `rubric serve` serves one) gets the calibration
    shipped for it, any other model none. calibrations: {method name: Calibration} replacing the file's or the
    shipped entries. Method, calibration, identity and cache keys are the JudgeBackend's
    (rubrics/judges/backend.py); this class sends the prompts to the server.
    Each judge() call opens its own connections, so several may run at once (`concurrent_calls`: the JudgeBatcher
    sends a batch that forms while another is out at once, and the server batches both; each call keeps its own
    `concurrency` bound).
    """

    kind = "openai"
    concurrent_calls: int = 4

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None, *, concurrency: int = 16,
                 timeout: float = 120.0, max_retries: int = 4, top_logprobs: int = TOP_LOGPROBS,
                 seed: int | None = 0, method: str | None = None, calibration: Any = None,
                 calibrations: dict[str, Calibration] | None = None, environment_key: bool = True):
        if concurrency < 1:
            raise ValueError(f"concurrency: expected an integer >= 1, got {concurrency!r}")
        if not timeout > 0:
            raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries: expected an integer >= 0, got {max_retries!r}")
        self.url = chat_completions_url(base_url)
        self.models_url = self.url.removesuffix("/chat/completions") + "/models"
        self.model = model
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.policy = RetryPolicy(max_retries=max_retries)
        self.top_logprobs = top_logprobs
        self.seed = seed
        # without model= the server names its model at the first call; then the base fits the judge to it again
        self.set_up(FitRequest(method, calibration, calibrations))
        # environment_key=False: a server someone else named (a rubric's panel member) gets no key of the user's
        key = api_key or (api_key_from_environment() if environment_key else None)
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}

    def _runs_over_http(self, name: str) -> bool:
        """Whether a chat server can run the method (known by its class, before it is made); ValueError for an
        unknown name."""
        if name not in METHOD_CLASSES:
            make_method(name)   # raises the registry's error, with the known names
        return METHOD_CLASSES[name].over_http

    # -- what the JudgeBackend asks of its backend ------------------------------------------------------------
    def model_identity(self) -> ModelIdentity | None:
        """The served model's name (no weights hash: a server does not say it); None until it is known."""
        return ModelIdentity(self.model, None) if self.model is not None else None

    def model_label(self) -> str:
        return self.model or "served-model"

    def default_method(self, known: JudgeModel | None, head: Any) -> str:
        """The one method every chat server can run, whatever the model (a catalog model's own may not be)."""
        return DEFAULT_HTTP_METHOD

    def check_method(self, name: str) -> None:
        if not self._runs_over_http(name):
            raise ValueError(f"method: {name!r} needs prompt log-probabilities, which OpenAI-compatible chat "
                             "servers do not return")

    def key_shared(self) -> dict[str, Any] | None:
        """The server's URL and model; None while the model is unnamed (no --model and not yet asked of the
        server): the key must say which model answered."""
        return None if self.model is None else {"url": self.url, "model": self.model}

    def key_sent(self, requests: Sequence[JudgeRequest]) -> list[KeyedRequest | None]:
        """The body of each call a verdict starts from (the first of a reasoned prompt: the answer's call depends
        on the rationale it returns); None for a request naming no registered method."""
        keyed: list[KeyedRequest | None] = []
        for request in requests:
            try:
                method = self.method_for(request.item)
            except ValueError:
                keyed.append(None)
                continue
            keyed.append(KeyedRequest(method, {"bodies": [self._first_body(request, spec)
                                                          for spec in method.prompts(request.item)]}))
        return keyed

    def comparison_sent(self, requests: Sequence[ComparisonRequest]) -> list[dict[str, Any] | None]:
        return [{"body": self._first_body(request, comparison_spec(request.item))} for request in requests]

    # ---------------------------------------------------------------- public

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        if not requests:
            return []
        return _run_blocking(self.ajudge(requests))

    async def ajudge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return await self._each(requests, self._judge_one)

    def compare(self, requests: Sequence[ComparisonRequest]) -> list[Verdict]:
        """Each pair's verdict: the probability that its first attempt meets the item better
        (rubrics/judges/comparison.py), read from the answers' log-probabilities as a verdict is."""
        if not requests:
            return []
        return _run_blocking(self._each(requests, self._compare_one))

    async def _compare_one(self, client: httpx.AsyncClient, gate: asyncio.Semaphore,
                           request: ComparisonRequest) -> Verdict:
        spent: list[JudgeUsage] = []
        try:
            async with gate:
                scored = await self._score_spec(client, request, comparison_spec(request.item), spent)
            if isinstance(scored, ScoredPrompt):
                verdict = comparison_verdict(*scored.logprobs)
            else:
                first = parse_one_word_answer(scored.text, ANSWERS)
                if first is None:
                    raise JudgeAnswerError(f"the server returned no log-probabilities for A/B and its answer "
                                           f"{str(scored.text)[:80]!r} is not one of them")
                verdict = Verdict(met=first, probability=1.0 if first else 0.0,
                                  rationale="answer parsed from the text: the server returned no log-probabilities")
        except (JudgeHTTPError, JudgeAnswerError) as exc:
            verdict = Verdict(met=None, probability=None, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - one broken request must never sink the batch
            verdict = Verdict(met=None, probability=None, error=f"judge call failed: {type(exc).__name__}: {exc}")
        return replace(verdict, usage=sum(spent, JudgeUsage()))

    async def _each(self, requests: Sequence, one: Any) -> list[Verdict]:
        """one(client, gate, request) for every request, at most `concurrency` at once, on one client."""
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        # httpx's own timeout stays off: post_json enforces one deadline over all attempts.
        async with httpx.AsyncClient(limits=limits, timeout=None) as client:
            if self.model is None:
                try:
                    await self._discover_model(client)
                except (JudgeHTTPError, JudgeAnswerError, CalibrationFileError) as exc:
                    return [Verdict(met=None, probability=None, error=str(exc)) for _ in requests]
            gate = asyncio.Semaphore(self.concurrency)
            return list(await asyncio.gather(*(one(client, gate, r) for r in requests)))

    async def _discover_model(self, client: httpx.AsyncClient) -> None:
        """No --model given: use the server's model when it serves exactly one (as `rubric serve` does)."""
        body = await get_json(client, self.models_url, deadline_s=self.timeout, policy=self.policy,
                              headers=self._headers)
        ids = [entry.get("id") for entry in body.get("data") or [] if isinstance(entry, dict)]
        if len(ids) != 1 or not isinstance(ids[0], str):
            raise JudgeAnswerError(f"{self.models_url} lists {len(ids)} models {ids[:5]}; name one with --model")
        self.model = ids[0]
        try:   # the model's name is known only now: its shipped calibration, the user's file checked against it
            self.refit()
        except FittedFileError:
            self.model = None   # asked, and checked, again next call
            self.forget_identity()
            raise

    def _first_body(self, request: JudgeRequest, spec: PromptSpec) -> dict[str, Any]:
        messages = spec_messages(request, spec)
        if spec.reasoning is None:
            return self.payload(messages, max_tokens=1, logprobs=True)
        return {"rationale": self.payload(messages, max_tokens=spec.reasoning.max_tokens, logprobs=False),
                "follow_up": spec.reasoning.follow_up, "answer_logprobs": self.top_logprobs}

    # ---------------------------------------------------------------- one request

    async def _judge_one(self, client: httpx.AsyncClient, gate: asyncio.Semaphore,
                         request: JudgeRequest) -> Verdict:
        item = request.item
        try:
            over_http = self._runs_over_http(method_name_for(item, self.method))
            method = self.method_for(item) if over_http else None
        except ValueError as exc:   # a request naming no registered method: its own error, not the batch's
            return Verdict(met=None, probability=None, error=str(exc))
        if method is None:
            return Verdict(met=None, probability=None, error=(
                f"method {method_name_for(item, self.method)!r} needs prompt log-probabilities, which "
                "OpenAI-compatible chat servers do not return; use a method that runs over HTTP (choice) with "
                "--judge openai, or the embedded judge"))
        specs = method.prompts(item)
        spent: list[JudgeUsage] = []   # each answered call's usage, as the server reported it
        try:
            scored = []
            async with gate:
                for spec in specs:
                    scored.append(await self._score_spec(client, request, spec, spent))
            verdict = verdict_from_scores(method, item, specs, scored)
        except (JudgeHTTPError, JudgeAnswerError) as exc:
            verdict = Verdict(met=None, probability=None, error=str(exc))
        except Exception as exc:  # noqa: BLE001 - one broken request must never sink the batch
            verdict = Verdict(met=None, probability=None, error=f"judge call failed: {type(exc).__name__}: {exc}")
        return replace(verdict, usage=sum(spent, JudgeUsage()))

    async def _score_spec(self, client: httpx.AsyncClient, request: JudgeRequest, spec: PromptSpec,
                          spent: list[JudgeUsage]) -> ScoredPrompt | AnswerText:
        """The answers' log-probabilities for one of the method's prompts; without them, the answer's text."""
        messages = spec_messages(request, spec)
        rationale = None
        if spec.reasoning is not None:
            rationale = await self._rationale(client, messages, spec.reasoning.max_tokens, spent)
            # the rationale is the server's text about untrusted evidence: neutralised like the evidence itself
            messages = messages + spec.reasoning.turns_after(prompts.neutralise_special_tokens(rationale))
        body = await self._post(client, messages, max_tokens=1, logprobs=True, spent=spent)
        choice = first_choice(body)
        answers = tuple(piece.text for piece in spec.choices)
        logprobs = answer_logprobs(choice, answers)
        if logprobs is not None:
            return ScoredPrompt(logprobs, (1,) * len(answers), rationale)
        return AnswerText((choice.get("message") or {}).get("content"), rationale)

    async def _rationale(self, client: httpx.AsyncClient, messages: list[dict[str, Any]], max_tokens: int,
                         spent: list[JudgeUsage]) -> str:
        body = await self._post(client, messages, max_tokens=max_tokens, logprobs=False, spent=spent)
        text = (first_choice(body).get("message") or {}).get("content")
        if not isinstance(text, str) or not text.strip():
            raise JudgeAnswerError(f"{self.url} returned an empty rationale in reasoned mode")
        return text.strip()

    def payload(self, messages: list[dict[str, Any]], *, max_tokens: int, logprobs: bool) -> dict[str, Any]:
        """The request body of one call (the verdict cache keys on it)."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                                   "temperature": 0.0}
        if self.seed is not None:
            payload["seed"] = self.seed
        if logprobs:
            payload.update(logprobs=True, top_logprobs=self.top_logprobs)
        return payload

    async def _post(self, client: httpx.AsyncClient, messages: list[dict[str, Any]], *, max_tokens: int,
                    logprobs: bool, spent: list[JudgeUsage]) -> dict[str, Any]:
        body = await post_json(client, self.url, self.payload(messages, max_tokens=max_tokens, logprobs=logprobs),
                               deadline_s=self.timeout, policy=self.policy, headers=self._headers)
        spent.append(JudgeUsage.from_openai(body))
        return body


def spec_messages(request: JudgeRequest | ComparisonRequest, spec: PromptSpec) -> list[dict[str, Any]]:
    return prompts.chat_messages(request.context, spec.instructions, spec.item, content_free=spec.content_free)


# -------------------------------------------------------------------- reading a verdict


def first_choice(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise JudgeAnswerError(f"the server's answer has no choices: {str(body)[:200]}")
    return choices[0]


@dataclass(frozen=True)
class AnswerText:
    """A server answer without log-probabilities: only its text can decide, and only for a one-prompt method."""
    text: Any
    rationale: str | None


def verdict_from_scores(method: JudgeMethod, item: JudgeItem, specs: list[PromptSpec],
                        scored: list[ScoredPrompt | AnswerText]) -> Verdict:
    if all(isinstance(s, ScoredPrompt) for s in scored):
        return method.verdict(item, scored)  # type: ignore[arg-type]
    answers = tuple(piece.text for piece in specs[-1].choices)
    answer = scored[-1]
    met = parse_one_word_answer(answer.text, answers) if len(specs) == 1 else None
    if met is None:
        raise JudgeAnswerError(
            f"the server returned no log-probabilities for {'/'.join(answers)}"
            + (f" and its answer {str(answer.text)[:80]!r} is not one of them" if len(specs) == 1 else
               f", which the {method.name} method needs"))
    note = "verdict parsed from the answer text: the server returned no log-probabilities"
    rationale = answer.rationale
    return Verdict(met=met, probability=1.0 if met else 0.0, rationale=f"{rationale}\n{note}" if rationale else note)


def answer_logprobs(choice: dict[str, Any], answers: tuple[str, ...]) -> tuple[float, ...] | None:
    """Each answer's log-probability at the first generated token, from its top log-probabilities.

    Only the exact answer tokens count, as in the embedded judge, so the two judges agree on one model. When an
    answer is outside the top-k, its log-probability is at most the smallest one shown, and that bound stands in
    for it (a conservative estimate). None when no answer is shown. A log-probability that no distribution can
    have (NaN, infinite, positive, not a number) raises JudgeAnswerError: a verdict computed from it would be a
    silent guess.
    """
    content = (choice.get("logprobs") or {}).get("content")
    if not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    top = [entry for entry in first.get("top_logprobs") or [] if isinstance(entry, dict)]
    if not top:   # the sampled token alone says nothing about the other answer
        return None
    candidates = {first.get("token"): first.get("logprob")}
    for entry in top:
        candidates.setdefault(entry.get("token"), entry.get("logprob"))
    shown = {token: checked_logprob(token, lp) for token, lp in candidates.items()}
    found = [shown.get(answer) for answer in answers]
    if all(value is None for value in found):
        return None
    floor = min(shown.values())
    return tuple(floor if value is None else value for value in found)


# Servers compute log-softmax in float16/float32: the top token's value can come out a hair above 0.
LOGPROB_ROUNDING = 1e-4


def checked_logprob(token: Any, value: Any) -> float:
    """The log-probability as a float <= 0, or JudgeAnswerError saying what the server sent instead."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value > LOGPROB_ROUNDING:
        raise JudgeAnswerError(f"the server returned log-probability {value!r} for token {token!r}; "
                               "expected a finite number <= 0")
    return min(float(value), 0.0)


def parse_one_word_answer(text: Any, answers: tuple[str, ...]) -> bool | None:
    """The met answer or the unmet one (any case, one trailing period allowed) and nothing else: anything longer
    is not a verdict."""
    if not isinstance(text, str):
        return None
    word = text.strip().removesuffix(".").strip().lower()
    lowered = [answer.lower() for answer in answers]
    if word == lowered[0]:
        return True
    if word == lowered[1]:
        return False
    return None


def _run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also from code that already runs an event loop (a notebook): then in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target, name="openai-judge")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]
