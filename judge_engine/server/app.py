"""The OpenAI-compatible HTTP server on one engine: /v1/models, /v1/completions, /v1/chat/completions.

Every request becomes one engine request (its n choices are samples of it, sharing the prompt's KV blocks),
added to the engine loop while it runs, so concurrent clients share batches (continuous batching). A client that disconnects has its request aborted, which frees its KV blocks.
GET /metrics returns the engine's counters and the loop's (peak running sequences among them) as JSON.

Hardening: bodies over max_request_bytes get 413 before they are read in full, and large ones beyond a budget of
bytes per second 429 (limits.py); prompts are tokenized
in worker threads after a cheap length bound (tokenization.py), so the event loop and /health never wait on a
tokenizer; an unexpected exception is a normal 500 that keeps the connection (errors.InternalErrors), and a
stream always ends with an error event and `data: [DONE]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from judge_engine.server import protocol as p
from judge_engine.server.auth import BearerAuth
from judge_engine.server.engine_loop import EngineFailure, EngineLoop
from judge_engine.server.errors import InternalErrors, OpenAIError, error_response, from_validation_error
from judge_engine.server.limits import DEFAULT_LARGE_BODY_RATE, DEFAULT_MAX_REQUEST_BYTES, BodyLimit
from judge_engine.server.logprobs import TokenTexts, chat_logprobs, completion_logprobs
from judge_engine.server.tokenization import PromptEncoder

log = logging.getLogger(__name__)


class ServerState:
    """What the handlers share: the engine loop, the prompt encoder and a tokenizer of their own.

    The engine thread detokenizes and the encoder's threads tokenize; a fast tokenizer's Rust object refuses
    concurrent use from two threads ("Already borrowed"), so each of them, and the event loop (token texts for
    logprobs), works on its own copy.
    """

    def __init__(self, engine: Any, model_name: str):
        self.engine = engine
        self.loop = EngineLoop(engine)
        self.model_name = model_name
        self.tokenizer = copy.deepcopy(engine.tokenizer)
        self.token_texts = TokenTexts(self.tokenizer)
        self.max_model_len: int = engine.max_model_len
        self.encoder = PromptEncoder(engine.tokenizer, self.max_model_len)
        self.created = int(time.time())


def create_app(engine: Any, model_name: str, api_key: str | None = None,
               max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
               large_body_rate: float = DEFAULT_LARGE_BODY_RATE) -> Starlette:
    """The app for one engine; with api_key, the /v1 routes need `Authorization: Bearer <api_key>`; request
    bodies over max_request_bytes get 413, and large ones beyond large_body_rate bytes per second 429
    (limits.py)."""
    state = ServerState(engine, model_name)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state.loop.start()
        try:
            yield
        finally:
            state.loop.stop()
            state.encoder.close()

    routes = [
        Route("/v1/models", partial(list_models, state), methods=["GET"]),
        Route("/v1/completions", partial(completions, state), methods=["POST"]),
        Route("/v1/chat/completions", partial(chat_completions, state), methods=["POST"]),
        Route("/metrics", partial(metrics, state), methods=["GET"]),
        Route("/health", partial(health, state), methods=["GET"]),
    ]
    # outermost first: unexpected errors of everything below become 500s; a refused key is checked before the
    # body is read
    middleware = [Middleware(InternalErrors)]
    if api_key:
        middleware.append(Middleware(BearerAuth, api_key=api_key))
    middleware.append(Middleware(BodyLimit, max_bytes=max_request_bytes, large_body_rate=large_body_rate))
    # No handler for Exception: Starlette would send it and then re-raise, and uvicorn closes the connection
    # on a re-raised exception; InternalErrors answers those instead.
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                    exception_handlers={HTTPException: http_error, OpenAIError: openai_error})
    app.state.server = state
    return app


# ------------------------------------------------------------------------------------------ error handlers


async def http_error(request: Request, exc: HTTPException) -> Response:
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", type=kind)


async def openai_error(request: Request, exc: OpenAIError) -> Response:
    return exc.response()


# ------------------------------------------------------------------------------------------ simple routes


async def list_models(state: ServerState, request: Request) -> Response:
    card = p.ModelCard(id=state.model_name, created=state.created, max_model_len=state.max_model_len)
    return JSONResponse(p.ModelList(data=[card]).model_dump())


async def metrics(state: ServerState, request: Request) -> Response:
    return JSONResponse({"model": state.model_name, "engine": state.engine.stats(),
                         "server": state.loop.stats_dict()})


async def health(state: ServerState, request: Request) -> Response:
    if not state.loop.alive:
        return error_response(503, "the engine loop is not running", type="server_error")
    return JSONResponse({"status": "ok"})


# ------------------------------------------------------------------------------------------ request parsing


async def parse_body(request: Request, model: type[BaseModel]) -> Any:
    try:
        raw = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OpenAIError(400, f"the request body is not valid JSON: {exc}") from exc
    except RecursionError:   # a body of 200,000 nested brackets: the parser's recursion limit, not a server fault
        raise OpenAIError(400, "the request body is nested too deeply to be read") from None
    if not isinstance(raw, dict):
        raise OpenAIError(400, "the request body must be a JSON object")
    try:   # JSON may spell a lone surrogate ("\ud800"), which is not text: no tokenizer can take it
        json.dumps(raw, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise OpenAIError(400, f"the request body holds a lone surrogate ({exc.object[exc.start]!r}), which is not "
                               "Unicode text") from None
    except RecursionError:
        raise OpenAIError(400, "the request body is nested too deeply to be read") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(exc) from exc


def client_address(request: Request) -> str:
    """Whom the tokenizer pool serves in turn: the client's address (its port changes with each connection)."""
    return request.client.host if request.client is not None else ""


def check_model(state: ServerState, name: str) -> None:
    if name != state.model_name:
        raise OpenAIError(404, f"the model {name!r} does not exist; this server serves {state.model_name!r}",
                          param="model", code="model_not_found")


def sampling_params(body: p.OpenAIRequest, max_tokens: int, logprobs: int | None) -> Any:
    from judge_engine.engine.sampler import SamplingParams, SamplingParamsError

    try:
        return SamplingParams(temperature=body.temperature, top_p=body.top_p, max_tokens=max_tokens,
                              stop=list(body.stop or []) or None, seed=body.seed, logprobs=logprobs,
                              n=body.n, best_of=getattr(body, "best_of", None))
    except SamplingParamsError as exc:
        raise OpenAIError(400, str(exc), param=str(exc).split(":", 1)[0]) from exc


def token_budget(state: ServerState, prompt_len: int, requested: int | None, prompt_param: str) -> int:
    """max_tokens, defaulting to the rest of the context; 400 when prompt + max_tokens exceeds it."""
    room = state.max_model_len - prompt_len
    if room <= 0 or (requested is not None and requested > room):
        asked = f"{prompt_len + requested} tokens ({prompt_len} in the {prompt_param}, {requested} in the " \
                f"completion)" if requested is not None else f"{prompt_len} tokens in the {prompt_param}"
        raise OpenAIError(400, f"this model's maximum context length is {state.max_model_len} tokens, but you "
                          f"requested {asked}; shorten the {prompt_param} or lower max_tokens",
                          param="max_tokens" if room > 0 else prompt_param, code="context_length_exceeded")
    return requested if requested is not None else room


# ------------------------------------------------------------------------------------------ completions


async def completions(state: ServerState, request: Request) -> Response:
    body: p.CompletionRequest = await parse_body(request, p.CompletionRequest)
    check_model(state, body.model)
    prompt_ids = await state.encoder.encode_prompt(body.prompt, client_address(request))
    max_tokens = token_budget(state, len(prompt_ids), body.max_tokens, "prompt")
    params = sampling_params(body, max_tokens, body.logprobs)
    request_id = state.loop.new_request_id("cmpl")
    outputs = state.loop.generate(request_id, prompt_ids, params)
    if body.stream:
        return sse(request_id, stream_completion(state, body, request_id, outputs))
    final = await until_finished_or_disconnected(request, outputs)
    if final is None:
        return Response(status_code=499)
    raise_if_failed(final)
    choices = []
    for completion in final.outputs:
        logprobs = None
        if body.logprobs is not None:
            logprobs = completion_logprobs(state.token_texts, completion.token_ids, completion.logprobs or [],
                                           body.logprobs)
        choices.append(p.CompletionChoice(index=completion.index, text=completion.text, logprobs=logprobs,
                                          finish_reason=completion.finish_reason))
    response = p.CompletionResponse(id=request_id, created=p.now(), model=state.model_name, choices=choices,
                                    usage=usage(final))
    return JSONResponse(response.model_dump())


async def stream_completion(state: ServerState, body: p.CompletionRequest, request_id: str,
                            outputs: AsyncIterator[Any]) -> AsyncIterator[str]:
    created = p.now()
    choices = ChoiceStreams()
    async for output in failures_as_errors(outputs):
        if isinstance(output, str):
            yield output
            break
        for completion, sent_tokens, offset, finish in choices.updates(output):
            new_ids = completion.token_ids[sent_tokens:]
            logprobs = None
            if body.logprobs is not None:
                logprobs = completion_logprobs(state.token_texts, new_ids, (completion.logprobs or [])[sent_tokens:],
                                               body.logprobs, offset)
            choice = p.CompletionChoice(index=completion.index, text=completion.new_text, logprobs=logprobs,
                                        finish_reason=finish)
            yield sse_data(p.CompletionChunk(id=request_id, created=created, model=state.model_name,
                                             choices=[choice]))
        if output.finished and body.include_usage_in_stream():
            yield sse_data(p.CompletionChunk(id=request_id, created=created, model=state.model_name, choices=[],
                                             usage=usage(output)))


# ------------------------------------------------------------------------------------------ chat


async def chat_completions(state: ServerState, request: Request) -> Response:
    body: p.ChatCompletionRequest = await parse_body(request, p.ChatCompletionRequest)
    check_model(state, body.model)
    messages = [{"role": m.role, "content": m.text()} for m in body.messages]
    prompt_ids = await state.encoder.encode_chat(messages, client_address(request))
    max_tokens = token_budget(state, len(prompt_ids), body.token_limit(), "messages")
    top_n = (body.top_logprobs or 0) if body.logprobs else None
    params = sampling_params(body, max_tokens, top_n)
    request_id = state.loop.new_request_id("chatcmpl")
    outputs = state.loop.generate(request_id, prompt_ids, params)
    if body.stream:
        return sse(request_id, stream_chat(state, body, request_id, outputs))
    final = await until_finished_or_disconnected(request, outputs)
    if final is None:
        return Response(status_code=499)
    raise_if_failed(final)
    choices = []
    for completion in final.outputs:
        logprobs = None
        if top_n is not None:
            logprobs = chat_logprobs(state.token_texts, completion.token_ids, completion.logprobs or [], top_n)
        choices.append(p.ChatChoice(index=completion.index, message=p.AssistantMessage(content=completion.text),
                                    logprobs=logprobs, finish_reason=completion.finish_reason))
    response = p.ChatCompletionResponse(id=request_id, created=p.now(), model=state.model_name, choices=choices,
                                        usage=usage(final))
    return JSONResponse(response.model_dump())


async def stream_chat(state: ServerState, body: p.ChatCompletionRequest, request_id: str,
                      outputs: AsyncIterator[Any]) -> AsyncIterator[str]:
    created = p.now()
    top_n = (body.top_logprobs or 0) if body.logprobs else None

    def chunk(index: int, delta: p.ChatDelta, logprobs: p.ChatLogprobs | None = None,
              finish: str | None = None) -> str:
        choice = p.ChatChunkChoice(index=index, delta=delta, logprobs=logprobs, finish_reason=finish)
        return sse_data(p.ChatCompletionChunk(id=request_id, created=created, model=state.model_name,
                                              choices=[choice]))

    for index in range(body.n):
        yield chunk(index, p.ChatDelta(role="assistant", content=""))
    choices = ChoiceStreams()
    async for output in failures_as_errors(outputs):
        if isinstance(output, str):
            yield output
            break
        for completion, sent_tokens, _, finish in choices.updates(output):
            logprobs = None
            if top_n is not None:
                logprobs = chat_logprobs(state.token_texts, completion.token_ids[sent_tokens:],
                                         (completion.logprobs or [])[sent_tokens:], top_n)
            yield chunk(completion.index, p.ChatDelta(content=completion.new_text), logprobs, finish)
        if output.finished and body.include_usage_in_stream():
            yield sse_data(p.ChatCompletionChunk(id=request_id, created=created, model=state.model_name, choices=[],
                                                 usage=usage(output)))


# ------------------------------------------------------------------------------------------ shared helpers


class ChoiceStreams:
    """What each streamed choice has been sent: a choice gets a chunk when it gained tokens or just finished."""

    def __init__(self) -> None:
        self.sent_tokens: dict[int, int] = {}
        self.text_offset: dict[int, int] = {}
        self.finished: set[int] = set()

    def updates(self, output: Any) -> list[tuple[Any, int, int, str | None]]:
        """(completion, tokens sent before, text sent before, finish_reason to send or None) per choice to send."""
        updates = []
        for completion in output.outputs:
            index = completion.index
            done = output.finished or (len(output.outputs) > 1 and completion.finish_reason is not None)
            if index in self.finished or (not completion.new_token_ids and not done):
                continue
            sent, offset = self.sent_tokens.get(index, 0), self.text_offset.get(index, 0)
            self.sent_tokens[index] = len(completion.token_ids)
            self.text_offset[index] = offset + len(completion.new_text)
            if done:
                self.finished.add(index)
            updates.append((completion, sent, offset, completion.finish_reason if done else None))
        return updates


async def until_finished_or_disconnected(request: Request, outputs: AsyncIterator[Any]) -> Any | None:
    """The final output, or None when the client went away first (its request is then aborted)."""

    async def last() -> Any:
        final = None
        async for output in outputs:
            final = output
        return final

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    work, watch = asyncio.ensure_future(last()), asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
    if work not in done:
        with contextlib.suppress(asyncio.CancelledError):
            await work   # lets the generator's finally run, which aborts the engine request
        await outputs.aclose()
        return None
    try:
        return work.result()
    except EngineFailure as exc:
        raise OpenAIError(500, str(exc), type="server_error") from exc


def raise_if_failed(output: Any) -> None:
    if output.finish_reason == "error":
        raise failed_output_error(output)


def failed_output_error(output: Any) -> OpenAIError:
    # Rejected: the request cannot run as given (too long for the cache, bad token ids), the client's mistake.
    # Anything else failed while it ran (the model, sampling, decoding): the server's.
    if getattr(output, "rejected", False):
        return OpenAIError(400, output.error or "the engine rejected the request", code="invalid_prompt")
    return OpenAIError(500, output.error or "generation failed", type="server_error")


def usage(output: Any) -> p.Usage:
    spent = output.usage
    return p.Usage(prompt_tokens=spent.prompt_tokens, completion_tokens=spent.output_tokens,
                   total_tokens=spent.prompt_tokens + spent.output_tokens,
                   prompt_tokens_details=p.PromptTokensDetails(cached_tokens=spent.cached_tokens))


def sse(request_id: str, events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(guarded_stream(request_id, events), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def guarded_stream(request_id: str, events: AsyncIterator[str]) -> AsyncIterator[str]:
    """The events, then `data: [DONE]`, whatever happens: the status line is already sent, so an exception has
    to travel in the stream as an error event, and a client waiting for [DONE] must get it."""
    try:
        async for event in events:
            yield event
    except Exception as exc:  # noqa: BLE001 - any failure mid-stream becomes the stream's last event
        log.exception("stream %s failed", request_id)
        error = exc if isinstance(exc, OpenAIError) else OpenAIError(
            500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")
        yield sse_error_event(error)
    yield "data: [DONE]\n\n"


def sse_data(model: BaseModel) -> str:
    return f"data: {model.model_dump_json(exclude_none=False)}\n\n"


async def failures_as_errors(outputs: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """The outputs, but an SSE error event (a str, and the last item) instead of a failed output, or of an
    exception if the engine fails mid-stream (the status line is already sent, so the error has to travel in
    the stream, as OpenAI's own streams do)."""
    try:
        async for output in outputs:
            if output.finish_reason == "error":
                yield sse_error_event(failed_output_error(output))
                return
            yield output
    except EngineFailure as exc:
        yield sse_error_event(OpenAIError(500, str(exc), type="server_error"))


def sse_error_event(error: OpenAIError) -> str:
    return f"data: {json.dumps(error.body())}\n\n"
