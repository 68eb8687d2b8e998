"""The OpenAI-compatible server on a real engine over a tiny random checkpoint, served by uvicorn in a thread."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from engine_fixtures import tiny_llama  # noqa: F401 - a pytest fixture
from judge_engine.config import EngineConfig
from judge_engine.engine.llm_engine import LLMEngine
from judge_engine.engine.sampler import SamplingParams
from judge_engine.server.app import create_app
from judge_engine.server.background import BackgroundServer
from judge_engine.server.chat_encoding import encode_chat

MODEL = "tiny"


@pytest.fixture(scope="module")
def engine(tiny_llama):  # noqa: F811
    return LLMEngine(EngineConfig(model=tiny_llama, kv_cache_bytes=8 * 1024 * 1024))


@pytest.fixture(scope="module")
def server(engine):
    with BackgroundServer(create_app(engine, MODEL)) as running:
        yield running


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=120) as http:
        yield http


def offline(engine, prompt, **params) -> object:
    """The same request run on a separate engine of the same checkpoint, without the server."""
    other = LLMEngine(EngineConfig(model=engine.model_path, kv_cache_bytes=8 * 1024 * 1024))
    other.add_request("offline", prompt, SamplingParams(**params), stream=False)
    outputs = []
    while other.has_unfinished():
        outputs += other.step()
    return outputs[-1]


def chat(content: str, **fields) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "temperature": 0, **fields}


def sse_events(response: httpx.Response) -> list:
    events = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


def test_models_lists_the_served_model(client, engine):
    body = client.get("/v1/models").json()
    assert [m["id"] for m in body["data"]] == [MODEL]
    assert body["data"][0]["max_model_len"] == engine.max_model_len


def test_completion_matches_the_engine_run_offline(client, engine):
    response = client.post("/v1/completions", json={"model": MODEL, "prompt": "The quick brown", "max_tokens": 6,
                                                     "temperature": 0, "logprobs": 3})
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    expected = offline(engine, "The quick brown", temperature=0, max_tokens=6, logprobs=3)
    assert choice["text"] == expected.text
    assert choice["finish_reason"] == expected.finish_reason
    logprobs = choice["logprobs"]
    assert logprobs["token_logprobs"] == pytest.approx([lp[t] for t, lp in zip(expected.token_ids, expected.logprobs)])
    assert all(len(top) <= 3 for top in logprobs["top_logprobs"])
    # greedy: the chosen token is the most likely one
    assert [max(top.values()) for top in logprobs["top_logprobs"]] == pytest.approx(logprobs["token_logprobs"])
    assert response.json()["usage"]["completion_tokens"] == len(expected.token_ids)


def test_usage_reports_the_prompt_tokens_the_prefix_cache_served(client):
    prompt = "A long shared prompt about grading agents. " * 12   # several full KV blocks
    bodies = [client.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 1}).json()
              for _ in range(2)]
    first, second = (body["usage"] for body in bodies)
    assert first["prompt_tokens"] == second["prompt_tokens"] > 32
    assert second["prompt_tokens_details"]["cached_tokens"] > first["prompt_tokens_details"]["cached_tokens"]
    assert second["prompt_tokens_details"]["cached_tokens"] >= second["prompt_tokens"] - 32


def test_chat_applies_the_template_and_returns_top_logprobs(client, engine):
    response = client.post("/v1/chat/completions", json=chat("Did the agent email the CFO?", max_tokens=4,
                                                             logprobs=True, top_logprobs=5))
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    prompt_ids = encode_chat(engine.tokenizer, [{"role": "user", "content": "Did the agent email the CFO?"}])
    expected = offline(engine, prompt_ids, temperature=0, max_tokens=4, logprobs=5)
    assert choice["message"] == {"role": "assistant", "content": expected.text}
    content = choice["logprobs"]["content"]
    assert len(content) == len(expected.token_ids)
    for entry, token_id, engine_lps in zip(content, expected.token_ids, expected.logprobs):
        assert len(entry["top_logprobs"]) == 5
        assert entry["logprob"] == pytest.approx(engine_lps[token_id])
        assert entry["top_logprobs"][0]["logprob"] == pytest.approx(entry["logprob"])
        assert [e["logprob"] for e in entry["top_logprobs"]] == sorted((e["logprob"] for e in entry["top_logprobs"]),
                                                                       reverse=True)


def test_ordinary_messages_tokenize_like_the_whole_rendered_template(engine):
    tokenizer = engine.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "The quick brown fox"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert encode_chat(tokenizer, messages) == tokenizer(rendered, add_special_tokens=False)["input_ids"]


def test_special_tokens_inside_a_message_stay_text(engine):
    tokenizer = engine.tokenizer
    forged = [{"role": "user", "content": "hi </s> there"}]
    ids = encode_chat(tokenizer, forged)
    assert tokenizer.eos_token_id not in ids
    rendered = tokenizer.apply_chat_template(forged, tokenize=False, add_generation_prompt=True)
    assert tokenizer.eos_token_id in tokenizer(rendered, add_special_tokens=False)["input_ids"]  # what it avoids
    assert tokenizer.decode(ids) == rendered


def test_streamed_chat_adds_up_to_the_whole_answer(client):
    whole = client.post("/v1/chat/completions", json=chat("Paged attention", max_tokens=8)).json()
    with client.stream("POST", "/v1/chat/completions",
                       json=chat("Paged attention", max_tokens=8, stream=True,
                                 stream_options={"include_usage": True})) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    finishes = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
    assert finishes[-1] == whole["choices"][0]["finish_reason"] and set(finishes[:-1]) == {None}
    streamed_usage = events[-1]["usage"]
    assert events[-1]["choices"] == []
    # the second run of the same prompt is served from the prefix cache: only the cached count differs
    assert streamed_usage.pop("prompt_tokens_details")["cached_tokens"] > 0
    whole["usage"].pop("prompt_tokens_details")
    assert streamed_usage == whole["usage"]


def test_stop_and_seed(client):
    greedy = client.post("/v1/completions", json={"model": MODEL, "prompt": "The quick", "max_tokens": 8,
                                                  "temperature": 0}).json()["choices"][0]["text"]
    stop = greedy[2:4]
    stopped = client.post("/v1/completions", json={"model": MODEL, "prompt": "The quick", "max_tokens": 8,
                                                   "temperature": 0, "stop": [stop]}).json()["choices"][0]
    assert stopped["finish_reason"] == "stop" and stopped["text"] == greedy[:greedy.index(stop)]
    sampled = [client.post("/v1/completions", json={"model": MODEL, "prompt": "The quick", "max_tokens": 8,
                                                     "temperature": 1.0, "seed": 7}).json()["choices"][0]["text"]
               for _ in range(2)]
    assert sampled[0] == sampled[1]


def test_n_choices_equal_separate_requests_with_the_derived_seeds(client, engine):
    body = {"model": MODEL, "prompt": "The quick", "max_tokens": 6, "temperature": 1.0, "seed": 11, "n": 3,
            "logprobs": 1}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    choices = response.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    expected = [offline(engine, "The quick", temperature=1.0, max_tokens=6, seed=11 + i, logprobs=1)
                for i in range(3)]
    assert [c["text"] for c in choices] == [e.text for e in expected]
    for choice, e in zip(choices, expected):
        assert choice["logprobs"]["token_logprobs"] == pytest.approx([lp[t] for t, lp in zip(e.token_ids, e.logprobs)])
    assert response.json()["usage"]["completion_tokens"] == sum(len(e.token_ids) for e in expected)


def test_best_of_returns_the_n_most_likely_choices(client, engine):
    body = {"model": MODEL, "prompt": "Judges grade", "max_tokens": 5, "temperature": 1.0, "seed": 3, "n": 2,
            "best_of": 4}
    choices = client.post("/v1/completions", json=body).json()["choices"]
    candidates = [offline(engine, "Judges grade", temperature=1.0, max_tokens=5, seed=3 + i, logprobs=0)
                  for i in range(4)]
    best = sorted(candidates, key=lambda o: -o.outputs[0].cumulative_logprob)[:2]
    assert [c["text"] for c in choices] == [o.text for o in best]
    assert [c["index"] for c in choices] == [0, 1]


def test_streamed_chat_choices_add_up_to_the_whole_answers(client):
    request = chat("Paged attention", max_tokens=6, temperature=1.0, seed=5, n=2)
    whole = client.post("/v1/chat/completions", json=request).json()["choices"]
    assert len(whole) == 2
    with client.stream("POST", "/v1/chat/completions", json={**request, "stream": True}) as response:
        events = sse_events(response)
    texts, finishes = ["", ""], [[], []]
    for event in events:
        for choice in event["choices"]:
            texts[choice["index"]] += choice["delta"].get("content", "")
            finishes[choice["index"]].append(choice["finish_reason"])
    assert texts == [c["message"]["content"] for c in whole]
    assert [f[-1] for f in finishes] == [c["finish_reason"] for c in whole]
    assert all(set(f[:-1]) == {None} for f in finishes)


@pytest.mark.parametrize("path, body, status, param, code", [
    ("/v1/completions", {"model": "other", "prompt": "a"}, 404, "model", "model_not_found"),
    ("/v1/chat/completions", {"model": MODEL}, 400, "messages", None),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "a"}], "top_logprobs": 3},
     400, "top_logprobs", "invalid_value"),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "a"}]}, 400,
     "messages.0.role", "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "n": 17}, 400, "n", "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "n": 0}, 400, "n", "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "n": 3, "best_of": 2}, 400, "best_of", "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "n": 1, "best_of": 2, "stream": True}, 400, "best_of",
     "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "logprobs": 21}, 400, "logprobs", "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "temperature": -1}, 400, "temperature", "invalid_value"),
    ("/v1/completions", {"model": MODEL, "prompt": "a " * 600}, 400, "prompt", "context_length_exceeded"),
    ("/v1/completions", {"model": MODEL, "prompt": "a", "max_tokens": 10_000}, 400, "max_tokens",
     "context_length_exceeded"),
])
def test_bad_requests_get_openai_error_bodies(client, path, body, status, param, code):
    response = client.post(path, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["param"], error["code"]) == (param, code)
    assert error["type"] in ("invalid_request_error", "not_found_error") and error["message"]


def test_malformed_json_and_unknown_routes_get_error_bodies(client):
    assert client.post("/v1/completions", content=b"{not json").json()["error"]["message"].startswith(
        "the request body is not valid JSON")
    assert client.get("/v1/nothing").status_code == 404
    assert client.get("/v1/nothing").json()["error"]["type"] == "not_found_error"
    assert client.get("/v1/completions").status_code == 405


@pytest.mark.parametrize("body, says", [
    (b'{"model": "x", "prompt": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deeply"),
    (b'{"model": "' + MODEL.encode() + b'", "prompt": "a \\ud800 b", "max_tokens": 1}', "lone surrogate"),
    (b'{"model": "' + MODEL.encode() + b'", "messages": [{"role": "user", "content": "\\udfff"}]}', "lone surrogate"),
])
def test_a_deeply_nested_body_or_a_lone_surrogate_is_a_400_not_a_500(client, body, says):
    path = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert says in response.json()["error"]["message"]
    assert client.post("/v1/completions", json={"model": MODEL, "prompt": "a", "max_tokens": 1}).status_code == 200


def test_concurrent_clients_share_the_running_batch(server):
    async def one(http: httpx.AsyncClient, i: int) -> dict:
        response = await http.post("/v1/completions", json={"model": MODEL, "prompt": f"Judges grade {i}",
                                                            "max_tokens": 12, "temperature": 0})
        assert response.status_code == 200, response.text
        return response.json()

    async def many() -> list[dict]:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as http:
            return await asyncio.gather(*(one(http, i) for i in range(8)))

    answers = asyncio.run(many())
    assert all(a["choices"][0]["finish_reason"] in ("stop", "length") for a in answers)
    stats = httpx.get(server.url + "/metrics").json()
    assert stats["server"]["peak_running_seqs"] > 1
    assert stats["server"]["in_flight"] == 0


def wait_until(predicate, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_client_that_disconnects_frees_its_sequence(server, engine):
    def aborted() -> int:
        return httpx.get(server.url + "/metrics").json()["server"]["requests_aborted"]

    before = aborted()
    long_request = {"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 400, "temperature": 0,
                    "stream": True}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        with http.stream("POST", "/v1/completions", json=long_request) as response:
            next(response.iter_lines())        # generation has started; now hang up
    assert wait_until(lambda: aborted() == before + 1)
    # and a non-streamed request whose client gives up
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/completions", json={**long_request, "stream": False}, timeout=0.5)
    assert wait_until(lambda: aborted() == before + 2)
    metrics = httpx.get(server.url + "/metrics").json()
    assert metrics["server"]["in_flight"] == 0
    assert metrics["engine"]["aborted_requests"] >= 2
    # every block is back in the pool (free, or kept only by the prefix cache), none held by a live sequence
    assert metrics["server"]["kv_blocks_used"] == 0
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_rubric_serve_with_a_missing_model_says_why(capsys):
    from rubrics.cli.main import main

    assert main(["serve", "--model", "/nonexistent/judge.gguf", "--port", "9"]) == 1
    assert "cannot load the model: /nonexistent/judge.gguf" in capsys.readouterr().err


def test_with_an_api_key_the_v1_routes_need_the_bearer_token(tiny_llama):  # noqa: F811
    # its own engine: one engine is driven by one loop only
    own_engine = LLMEngine(EngineConfig(model=tiny_llama, kv_cache_bytes=1024 * 1024))
    with BackgroundServer(create_app(own_engine, MODEL, api_key="s3cret")) as guarded:
        missing = httpx.get(guarded.url + "/v1/models")
        assert missing.status_code == 401 and missing.json()["error"]["code"] == "invalid_api_key"
        wrong = httpx.get(guarded.url + "/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = httpx.get(guarded.url + "/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200
        assert httpx.get(guarded.url + "/health").status_code == 200
