"""The server against hostile or unlucky requests: one request's failure stays its own, big bodies are refused
early, tokenizing never stalls the event loop, errors keep the connection and end streams properly, and the
metrics read the engine's real state after a failure. Real engine on the tiny checkpoint, real uvicorn."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

import judge_engine.engine.sampler as sampler_module
import judge_engine.server.app as app_module
import judge_engine.server.chat_encoding as chat_encoding
import judge_engine.server.tokenization as tokenization
from engine_fixtures import tiny_llama  # noqa: F401 - a pytest fixture
from judge_engine.config import EngineConfig
from judge_engine.engine.llm_engine import LLMEngine
from judge_engine.engine.sampler import SamplingParams
from judge_engine.server.app import create_app
from judge_engine.server.background import BackgroundServer

MODEL = "tiny"
PROMPT = "The quick brown"


@pytest.fixture
def engine(tiny_llama):  # noqa: F811 - every test gets its own: several patch its internals
    return LLMEngine(EngineConfig(model=tiny_llama, kv_cache_bytes=8 * 1024 * 1024))


def serve(engine, **options) -> BackgroundServer:
    return BackgroundServer(create_app(engine, MODEL, **options))


def completion(prompt: str = PROMPT, **fields) -> dict:
    return {"model": MODEL, "prompt": prompt, "max_tokens": 6, "temperature": 0, **fields}


def chat(content: str, **fields) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0,
            **fields}


def run_to_completion(engine: LLMEngine) -> dict:
    outputs = {}
    while engine.has_unfinished():
        for output in engine.step():
            outputs[output.request_id] = output
    return outputs


def greedy_text(engine: LLMEngine, prompt: str = PROMPT, max_tokens: int = 6) -> str:
    engine.add_request("reference", prompt, SamplingParams(temperature=0, max_tokens=max_tokens), stream=False)
    return run_to_completion(engine)["reference"].text


def sse_lines(response: httpx.Response) -> list[str]:
    return [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]


def record_batches(engine: LLMEngine) -> list[list[str]]:
    """The request ids of every batch the model runs, in order."""
    batches: list[list[str]] = []
    execute = engine.runner.execute

    def recording(scheduled):
        batches.append([item.seq.request_id for item in scheduled])
        return execute(scheduled)

    engine.runner.execute = recording
    return batches


# ------------------------------------------------------------------------------------------ one request fails alone


def test_a_tiny_temperature_is_greedy_and_spoils_no_other_request_of_its_step(engine):
    expected = greedy_text(engine)
    batches = record_batches(engine)
    engine.add_request("tiny", PROMPT, SamplingParams(temperature=1e-40, max_tokens=6, seed=3), stream=False)
    engine.add_request("greedy", PROMPT, SamplingParams(temperature=0, max_tokens=6), stream=False)
    outputs = run_to_completion(engine)
    assert set(batches[0]) == {"tiny", "greedy"}   # the same steps, from the first
    assert outputs["greedy"].text == expected and outputs["greedy"].finish_reason in ("stop", "length")
    assert outputs["tiny"].text == expected         # T -> 0 is the argmax
    assert SamplingParams(temperature=1e-40).greedy and not SamplingParams(temperature=1e-3).greedy


def test_a_request_whose_sampling_fails_fails_alone(engine, monkeypatch):
    expected = greedy_text(engine)
    batches = record_batches(engine)

    def broken(logits, params, generator):
        raise RuntimeError("probability tensor contains either inf, nan or element < 0")

    monkeypatch.setattr(sampler_module, "_sample_row", broken)
    engine.add_request("sampled", PROMPT, SamplingParams(temperature=0.7, max_tokens=6), stream=False)
    engine.add_request("greedy", PROMPT, SamplingParams(temperature=0, max_tokens=6), stream=False)
    outputs = run_to_completion(engine)
    assert set(batches[0]) == {"sampled", "greedy"}
    assert outputs["greedy"].text == expected
    failed = outputs["sampled"]
    assert failed.finish_reason == "error" and not failed.rejected and "probability tensor" in failed.error
    assert engine.block_manager.num_used == 0 and not engine.scheduler.has_unfinished()


def test_over_http_a_tiny_temperature_gets_the_greedy_answer(engine):
    expected = greedy_text(engine)
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        response = http.post("/v1/completions", json=completion(temperature=1e-40))
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["text"] == expected


def test_a_sampling_failure_is_a_500_for_that_request_and_ends_its_stream(engine, monkeypatch):
    def broken(logits, params, generator):
        raise RuntimeError("sampler exploded")

    monkeypatch.setattr(sampler_module, "_sample_row", broken)
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        plain = http.post("/v1/completions", json=completion(temperature=0.7))
        assert plain.status_code == 500 and plain.json()["error"]["type"] == "server_error"
        assert "sampler exploded" in plain.json()["error"]["message"]
        with http.stream("POST", "/v1/chat/completions", json=chat("hello", temperature=0.7, stream=True)) as stream:
            events = sse_lines(stream)
        assert events[-1] == "[DONE]" and "sampler exploded" in json.loads(events[-2])["error"]["message"]
        assert http.post("/v1/completions", json=completion()).status_code == 200


# ------------------------------------------------------------------------------------------ seeds


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", completion(seed=2 ** 70, temperature=1.0)),
    ("/v1/chat/completions", chat("hi", seed=-(2 ** 64), temperature=1.0)),
    ("/v1/chat/completions", chat("hi", seed=2 ** 70, temperature=1.0, stream=True)),
])
def test_an_out_of_range_seed_is_a_400(engine, path, body):
    with serve(engine) as server:
        response = httpx.post(server.url + path, json=body, timeout=60)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "seed"


def test_the_largest_int64_seed_is_accepted(engine):
    with serve(engine) as server:
        response = httpx.post(server.url + "/v1/completions", json=completion(seed=2 ** 63 - 1, temperature=1.0),
                              timeout=60)
    assert response.status_code == 200, response.text


def test_an_error_in_the_middle_of_a_stream_ends_it_with_an_error_event_and_done(engine, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("logprobs exploded")

    monkeypatch.setattr(app_module, "chat_logprobs", broken)
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        with http.stream("POST", "/v1/chat/completions",
                         json=chat("hello", stream=True, logprobs=True, top_logprobs=2)) as stream:
            assert stream.status_code == 200
            events = sse_lines(stream)
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["type"] == "server_error" and "logprobs exploded" in error["message"]


# ------------------------------------------------------------------------------------------ 500 keeps the connection


def failing_once(real, message: str):
    """``real`` that raises RuntimeError(message) on its first call only."""
    calls = []

    def wrapper(*args):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError(message)
        return real(*args)

    return wrapper


def test_a_500_keeps_the_connection_for_the_next_request(engine, monkeypatch):
    monkeypatch.setattr(app_module, "usage", failing_once(app_module.usage, "usage exploded"))
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        failed = http.post("/v1/completions", json=completion())
        assert failed.status_code == 500, failed.text
        assert failed.json()["error"] == {"message": "internal error: RuntimeError: usage exploded",
                                          "type": "server_error", "param": None, "code": None}
        ok = http.post("/v1/completions", json=completion())
        assert ok.status_code == 200, ok.text
        # one TCP connection for both: the server did not drop it after the 500
        assert client_port(failed) == client_port(ok)


def client_port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


# ------------------------------------------------------------------------------------------ request size


def test_a_body_over_the_limit_gets_413_before_it_is_read(engine):
    with serve(engine, max_request_bytes=10_000) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        declared = http.post("/v1/completions", json=completion("x" * 20_000))
        assert declared.status_code == 413
        assert declared.json()["error"]["code"] == "request_too_large"
        assert "10000 bytes" in declared.json()["error"]["message"]

        def chunks():   # no Content-Length: counted as it arrives
            for _ in range(50):
                yield b" " * 1000
        chunked = http.post("/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "request_too_large"
        assert http.post("/v1/completions", json=completion("x" * 100)).status_code == 200


def test_rubric_serve_takes_a_body_limit():
    from judge_engine.server.limits import DEFAULT_MAX_REQUEST_BYTES
    from rubrics.cli import serve as serve_cli
    from rubrics.cli.main import build_parser

    assert serve_cli.DEFAULT_MAX_REQUEST_BYTES == DEFAULT_MAX_REQUEST_BYTES
    assert build_parser().parse_args(["serve"]).max_request_bytes == DEFAULT_MAX_REQUEST_BYTES
    assert build_parser().parse_args(["serve", "--max-request-bytes", "1000"]).max_request_bytes == 1000
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--max-request-bytes", "0"])
    from judge_engine.server.limits import DEFAULT_LARGE_BODY_RATE

    assert serve_cli.DEFAULT_LARGE_BODY_RATE == DEFAULT_LARGE_BODY_RATE
    assert build_parser().parse_args(["serve"]).large_body_rate == DEFAULT_LARGE_BODY_RATE
    assert build_parser().parse_args(["serve", "--large-body-rate", "5e5"]).large_body_rate == 500_000


def test_a_prompt_too_long_to_fit_is_refused_without_tokenizing(engine, monkeypatch):
    def never(tokenizer, text):
        raise AssertionError("tokenized a prompt that the length bound refuses")

    monkeypatch.setattr(tokenization, "encode_text", never)
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        limit = server_state(server).encoder.max_prompt_chars
        response = http.post("/v1/completions", json=completion("x" * (limit + 1)))
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "context_length_exceeded"
        chat_response = http.post("/v1/chat/completions", json=chat("y" * (limit + 1)))
        assert chat_response.json()["error"]["code"] == "context_length_exceeded"


def test_a_prompt_within_the_loose_bound_but_past_the_context_is_refused_from_its_first_characters(engine,
                                                                                                    monkeypatch):
    """A prompt of ordinary text under max_prompt_chars (a megabyte for a real model) that cannot fit: the probe
    tokenizes only its first max_model_len * PROBE_CHARS_PER_TOKEN characters, never the whole text; a prompt of
    long whitespace runs that does fit is still answered."""
    seen: list[int] = []
    real_count, real_encode = tokenization.count_text, tokenization.encode_text

    def counting(tokenizer, text):
        seen.append(len(text))
        return real_count(tokenizer, text)

    def whole(tokenizer, text):
        seen.append(-len(text))
        return real_encode(tokenizer, text)

    monkeypatch.setattr(tokenization, "count_text", counting)
    monkeypatch.setattr(tokenization, "encode_text", whole)
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        encoder = server_state(server).encoder
        probe = encoder.max_model_len * tokenization.PROBE_CHARS_PER_TOKEN
        long_text = "judges grade the attempts " * (encoder.max_prompt_chars // 30)
        assert probe < len(long_text) <= encoder.max_prompt_chars
        for response in (http.post("/v1/completions", json=completion(long_text)),
                         http.post("/v1/chat/completions", json=chat(long_text))):
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == "context_length_exceeded"
            assert "already hold" in response.json()["error"]["message"]
        assert seen and max(abs(n) for n in seen) <= probe + 1 and all(n > 0 for n in seen)
        # a prompt longer than the probe with few tokens in many characters fits, and is answered (the tiny
        # vocabulary's tokens are short: a probe of 2 characters a token stands in for a real model's 8)
        seen.clear()
        monkeypatch.setattr(tokenization, "PROBE_CHARS_PER_TOKEN", 2)
        word = max((engine.tokenizer.decode([i]) for i in range(len(engine.tokenizer))),
                   key=lambda text: (len(text) if len(real_count(engine.tokenizer, text * 3)) <= 3 else 0))
        fitting = word * (encoder.probe_chars // len(word) + 1)
        assert len(fitting) > encoder.probe_chars
        assert len(real_count(engine.tokenizer, fitting)) < encoder.max_model_len - 16
        response = http.post("/v1/completions", json=completion(fitting))
        assert response.status_code == 200, response.text
        assert -len(fitting) in seen


def server_state(server: BackgroundServer):
    return server._server.config.app.state.server


def test_health_answers_while_a_request_is_being_tokenized(engine, monkeypatch):
    tokenizing, release = threading.Event(), threading.Event()
    real = chat_encoding.encode_template_text

    def slow(tokenizer, text):
        tokenizing.set()
        release.wait(60)   # bounded: a broken server must fail the test, not hang it
        return real(tokenizer, text)

    monkeypatch.setattr(chat_encoding, "encode_template_text", slow)
    with serve(engine) as server:
        answer: dict = {}
        worker = threading.Thread(target=lambda: answer.update(
            response=httpx.post(server.url + "/v1/chat/completions", json=chat("a long trajectory"), timeout=120)))
        worker.start()
        try:
            assert tokenizing.wait(30)
            health = httpx.get(server.url + "/health", timeout=10)
            assert health.status_code == 200
        finally:
            release.set()
            worker.join(120)
    assert answer["response"].status_code == 200


# ------------------------------------------------------------------------------------------ metrics after a failure


def test_after_a_failed_step_every_block_is_free_and_metrics_say_so(engine, monkeypatch):
    schedule = engine.scheduler.schedule
    failures, steps = [], []

    def fails_after_allocating():
        # the second step (a decode) fails after the prefill's step left its blocks recorded as in use
        out = schedule()
        if out.scheduled:
            steps.append(out)
        if len(steps) == 2 and not failures:
            failures.append(engine.block_manager.num_used)
            raise RuntimeError("scheduler bug")
        return out

    monkeypatch.setattr(engine.scheduler, "schedule", fails_after_allocating)
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        failed = http.post("/v1/completions", json=completion("Paged attention keeps keys " * 4))
        assert failed.status_code == 500 and "scheduler bug" in failed.json()["error"]["message"]
        assert failures and failures[0] > 0   # the failed step held blocks
        metrics = http.get("/metrics").json()
        assert engine.block_manager.num_used == 0 and not engine.has_unfinished()
        assert metrics["server"]["kv_blocks_used"] == 0 and metrics["server"]["in_flight"] == 0
        assert http.post("/v1/completions", json=completion()).status_code == 200


def test_a_model_failure_is_a_500_and_frees_the_batch(engine, monkeypatch):
    monkeypatch.setattr(engine.runner, "execute", failing_once(engine.runner.execute, "out of memory"))
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=60) as http:
        failed = http.post("/v1/completions", json=completion())
        # the prompt was fine: a failure of the model is the server's (500), not a rejected prompt (400)
        assert failed.status_code == 500 and failed.json()["error"]["type"] == "server_error"
        assert http.get("/metrics").json()["server"]["kv_blocks_used"] == 0 == engine.block_manager.num_used


def test_the_tokenizer_pool_serves_clients_in_turn(engine, monkeypatch):
    """One client with eight slow prompts queued, then another with one: with two workers the second client's
    prompt starts as soon as a worker frees, not after the first client's eight."""
    import asyncio
    import time

    real = tokenization.encode_text

    def slow(tokenizer, text):
        time.sleep(0.2)
        return real(tokenizer, text)

    monkeypatch.setattr(tokenization, "encode_text", slow)
    encoder = tokenization.PromptEncoder(engine.tokenizer, engine.max_model_len, workers=2)
    finished: list[str] = []

    async def one(client: str, number: int) -> None:
        await encoder.encode_prompt(f"judges grade {number}", client=client)
        finished.append(client)

    async def both() -> None:
        flood = [asyncio.create_task(one("flooder", n)) for n in range(8)]
        await asyncio.sleep(0.05)   # the flood is queued first
        await asyncio.gather(one("polite", 0), *flood)

    try:
        asyncio.run(both())
    finally:
        encoder.close()
    assert finished.index("polite") <= 3, finished   # FIFO would make it the ninth
    assert finished.count("flooder") == 8


def test_large_bodies_past_the_budget_get_429_before_they_are_read_and_small_ones_never_do(engine):
    from judge_engine.server.limits import FREE_BODY_BYTES

    large = chat("lorem ipsum " * 20_000)   # about 240 KB: paid from the budget
    # a budget of 10 KB per second; the bucket holds one body of the cap (300 KB), the first large body takes 175 KB
    with serve(engine, max_request_bytes=300_000, large_body_rate=10_000) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        first = http.post("/v1/chat/completions", json=large)
        assert first.status_code == 400   # read, then refused by the context probe: it was paid for and read
        second = http.post("/v1/chat/completions", json=large)
        assert second.status_code == 429, second.text
        assert second.json()["error"]["code"] == "large_bodies_throttled"
        assert 3 <= int(second.headers["Retry-After"]) <= 8   # (175 KB - 125 KB left) at 10 KB/s
        small = chat("x" * (FREE_BODY_BYTES // 2))   # under the free size: never rationed
        assert http.post("/v1/chat/completions", json=small).status_code != 429

        def chunks():   # no Content-Length: paid as it arrives
            for _ in range(140):
                yield b" " * 2000
        chunked = http.post("/v1/chat/completions", content=chunks(), headers={"Content-Type": "application/json"})
        assert chunked.status_code == 429 and chunked.json()["error"]["code"] == "large_bodies_throttled"


def test_the_large_body_budget_refills_at_its_rate():
    from judge_engine.server.limits import LargeBodyBudget

    now = [0.0]
    budget = LargeBodyBudget(rate=1000, burst=5000, clock=lambda: now[0])
    assert budget.take(5000) is None
    assert budget.take(1000) == pytest.approx(1.0)   # refused: a second until it could pay
    now[0] = 1.0
    assert budget.take(1000) is None
    assert budget.take(20_000) == pytest.approx(5.0)  # larger than it holds: pays once full
    now[0] = 6.0
    assert budget.take(20_000) is None
    with pytest.raises(ValueError):
        LargeBodyBudget(rate=0, burst=1)
