"""`rubric serve` against floods: many-message chats (a bound on the count, and chat encoding linear in it),
token ids that are not integers, connections that send half their headers or body, too many connections in all
or from one client, and a log that a flood cannot grow without bound. Real engine on the tiny checkpoint, real
uvicorn on 127.0.0.1 under the limits `rubric serve` uses; raw sockets for the half-sent requests."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time

import httpx
import pytest

import judge_engine.server.chat_encoding as chat_encoding
from engine_fixtures import tiny_llama  # noqa: F401 - a pytest fixture
from judge_engine.config import EngineConfig
from judge_engine.engine.llm_engine import LLMEngine
from judge_engine.server.app import create_app
from judge_engine.server.background import BackgroundServer
from judge_engine.server.connections import ConnectionLimits, RepeatFilter
from judge_engine.server.protocol import MAX_CHAT_MESSAGES

MODEL = "tiny"
WAIT_S = 60   # how long a test waits for the server to act: a bound on a broken server, never a timing assert


@pytest.fixture(scope="module")
def engine(tiny_llama):  # noqa: F811
    return LLMEngine(EngineConfig(model=tiny_llama, kv_cache_bytes=8 * 1024 * 1024))


def serve(engine, **limits) -> BackgroundServer:
    return BackgroundServer(create_app(engine, MODEL), limits=ConnectionLimits(**limits))


def connect(server: BackgroundServer) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=WAIT_S)
    sock.settimeout(WAIT_S)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout if it never does)."""
    received = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            return received
        received += piece


# ------------------------------------------------------------------------------------------ many-message chats


class CountingTokenizer:
    """The tiny tokenizer, counting its encode calls."""

    def __init__(self, tokenizer):
        self.inner = tokenizer
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def segments_one_by_one(tokenizer, messages):
    """The encoding as it was (one split and two tokenizer calls per message): the reference for small inputs."""
    tag = "REF"
    sentinels = [f"QQ{tag}M{i}QQ" for i in range(len(messages))]
    rendered = chat_encoding.render(tokenizer, [{**m, "content": s} for m, s in zip(messages, sentinels)])
    ids = []
    for message, sentinel in zip(messages, sentinels):
        before, rendered = rendered.split(sentinel)
        ids += chat_encoding.encode_template_text(tokenizer, before)
        ids += chat_encoding.encode_content(tokenizer, message["content"])
    return ids + chat_encoding.encode_template_text(tokenizer, rendered)


def test_special_token_content_encodes_as_before_with_special_tokens_kept_text(engine):
    tokenizer = engine.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi </s> there"},
                {"role": "assistant", "content": ""}, {"role": "user", "content": "<s>again</s>"}]
    ids = chat_encoding.encode_chat(tokenizer, messages)
    assert ids == segments_one_by_one(tokenizer, messages)
    assert tokenizer.eos_token_id not in ids


def test_a_flood_of_empty_messages_is_encoded_in_a_constant_number_of_tokenizer_calls(engine):
    messages = [{"role": "user", "content": "</s>"}] + [{"role": "user", "content": ""}] * 31_999
    counting = CountingTokenizer(engine.tokenizer)
    ids = chat_encoding.encode_chat_segments(counting, messages)
    assert counting.calls <= 2   # the template's pieces in one batch, the contents in another
    assert engine.tokenizer.eos_token_id not in ids
    assert engine.tokenizer.decode(ids) == chat_encoding.render(engine.tokenizer, messages)


def test_a_template_that_drops_or_repeats_a_message_is_refused(engine):
    class Dropping(CountingTokenizer):
        chat_template = "x"

        def apply_chat_template(self, messages, **options):
            return "".join(f"{m['role']}: {m['content']}\n" for m in messages[:-1])

    with pytest.raises(chat_encoding.ChatTemplateError, match="does not render a 'user' message"):
        chat_encoding.encode_chat_segments(Dropping(engine.tokenizer), [{"role": "system", "content": "a"},
                                                                        {"role": "user", "content": "b"}])


def chat_body(messages: list[dict]) -> dict:
    return {"model": MODEL, "messages": messages, "max_tokens": 2, "temperature": 0}


def test_too_many_messages_are_refused_before_any_tokenizing(engine, monkeypatch):
    def never(*args):
        raise AssertionError("tokenized a chat that the message bound refuses")

    monkeypatch.setattr(chat_encoding, "encode_chat", never)
    flood = [{"role": "user", "content": "<|im_end|>"}] + [{"role": "user", "content": ""}] * 31_999
    with serve(engine) as server, httpx.Client(base_url=server.url, timeout=WAIT_S) as http:
        response = http.post("/v1/chat/completions", json=chat_body(flood))
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["param"] == "messages" and str(MAX_CHAT_MESSAGES) in error["message"]
        over_context = [{"role": "user", "content": ""}] * (engine.max_model_len + 1)
        response = http.post("/v1/chat/completions", json=chat_body(over_context))
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "context_length_exceeded"
        assert f"{engine.max_model_len + 1} messages" in response.json()["error"]["message"]
        assert http.get("/health").status_code == 200


def test_many_messages_within_the_bounds_are_answered(engine):
    messages = [{"role": "user", "content": "</s>"}] + [{"role": "user", "content": ""}] * 40
    with serve(engine) as server:
        response = httpx.post(server.url + "/v1/chat/completions", json=chat_body(messages), timeout=WAIT_S)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("prompt", [[True], [[True]], [1, True, 2], [False]])
def test_booleans_are_not_token_ids(engine, prompt):
    with serve(engine) as server:
        response = httpx.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": prompt,
                                                                     "max_tokens": 1}, timeout=WAIT_S)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"] == "prompt"
        ok = httpx.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": [1, 5, 7], "max_tokens": 1},
                        timeout=WAIT_S)
        assert ok.status_code == 200, ok.text


# ------------------------------------------------------------------------------------------ slow and many clients


def test_a_connection_that_never_finishes_its_headers_is_closed(engine):
    with serve(engine, header_timeout_s=0.5) as server:
        half = connect(server)
        half.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")
        assert httpx.get(server.url + "/health", timeout=WAIT_S).status_code == 200   # others are served meanwhile
        assert read_until_closed(half) == b""
        silent = connect(server)           # one that sends nothing at all
        assert read_until_closed(silent) == b""
        with httpx.Client(base_url=server.url, timeout=WAIT_S) as http:   # a kept-alive client is unaffected
            assert http.get("/health").status_code == 200
            assert http.get("/health").status_code == 200


def test_a_connection_that_never_finishes_its_body_is_closed(engine):
    with serve(engine, body_timeout_s=0.5) as server:
        slow = connect(server)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"model\": ")
        answer = read_until_closed(slow)
        assert b"200 OK" not in answer
        assert httpx.get(server.url + "/health", timeout=WAIT_S).status_code == 200


def test_one_client_cannot_hold_more_than_its_share_of_connections(engine):
    with serve(engine, max_connections_per_client=3, header_timeout_s=WAIT_S) as server:
        held = [connect(server) for _ in range(3)]
        for sock in held:   # make sure the server has accepted each before the next one
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"200 OK" in sock.recv(65536)
        extra = connect(server)
        answer = read_until_closed(extra)
        assert answer.startswith(b"HTTP/1.1 503") and b"too_many_connections" in answer
        assert b"--max-connections-per-client" in answer
        held.pop().close()
        with httpx.Client(base_url=server.url, timeout=WAIT_S) as http:
            for _ in range(WAIT_S * 10):   # the server sees the close when its loop gets to it
                response = http.get("/health")
                if response.status_code == 200:
                    break
            assert response.status_code == 200
        for sock in held:
            sock.close()


def test_the_server_caps_its_open_connections(engine):
    with serve(engine, max_connections=4, header_timeout_s=WAIT_S) as server:
        held = [connect(server) for _ in range(4)]
        for sock in held:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"200 OK" in sock.recv(65536)
        answer = read_until_closed(connect(server))
        assert answer.startswith(b"HTTP/1.1 503") and b"--max-connections" in answer
        for sock in held:
            sock.close()


def connect_from(server: BackgroundServer, address: str) -> socket.socket:
    """A connection from another loopback address (127.0.0.0/8 is all ours): another client to the server."""
    sock = socket.create_connection((server.host, server.port), timeout=WAIT_S, source_address=(address, 0))
    sock.settimeout(WAIT_S)
    return sock


def served_health(server: BackgroundServer, address: str, api_key: str | None = None) -> int:
    transport = httpx.HTTPTransport(local_address=address)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=server.url, timeout=WAIT_S, transport=transport, headers=headers) as http:
        return http.get("/v1/models").status_code


def test_idle_strangers_of_an_address_give_way_to_another_client_of_that_address(engine):
    """128 idle connections from one address, reopened after each header timeout, refused every other client of
    that address: a connection that never sent a request now gives its slot to a newcomer."""
    with serve(engine, max_connections_per_client=4, header_timeout_s=WAIT_S, stranger_grace_s=0.2) as server:
        idle = [connect_from(server, "127.0.0.5") for _ in range(4)]
        # the server has them all (a 5th was accepted and answered: the four are counted)
        for _ in range(WAIT_S * 10):
            if len(server._server.server_state.connections) >= 4:
                break
            time.sleep(0.1)
        time.sleep(0.3)   # past their grace
        assert served_health(server, "127.0.0.5") == 200
        closed = 0
        for sock in idle:
            sock.settimeout(0.5)
            try:
                closed += sock.recv(1) == b""
            except (socket.timeout, ConnectionResetError):
                pass
            sock.close()
        assert closed >= 1   # the oldest stranger was closed for it


def test_strangers_from_many_addresses_cannot_fill_the_server_for_clients_with_the_key(tiny_llama):  # noqa: F811
    engine = LLMEngine(EngineConfig(model=tiny_llama, kv_cache_bytes=8 * 1024 * 1024))
    app = create_app(engine, MODEL, api_key="sesame")
    limits = ConnectionLimits(max_connections=6, header_timeout_s=WAIT_S, stranger_grace_s=0.2)
    with BackgroundServer(app, limits=limits, api_key="sesame") as server:
        # a request without the key (a 401) does not make a connection known: it stays a stranger
        unkeyed = connect_from(server, "127.0.0.2")
        unkeyed.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"401" in unkeyed.recv(65536)
        idle = [unkeyed] + [connect_from(server, f"127.0.0.{2 + i % 4}") for i in range(5)]
        time.sleep(0.5)
        for attempt in range(3):   # each newcomer with the key closes the oldest stranger
            assert served_health(server, "127.0.0.9", api_key="sesame") == 200
        # a known connection is never closed for a newcomer: six held with the key, the seventh is refused
        keyed = []
        for _ in range(6):
            sock = connect_from(server, "127.0.0.10")
            sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sesame\r\n\r\n")
            assert b"200 OK" in sock.recv(65536)
            keyed.append(sock)
        time.sleep(0.3)
        answer = read_until_closed(connect_from(server, "127.0.0.11"))
        assert answer.startswith(b"HTTP/1.1 503") and b"--max-connections" in answer
        for sock in idle + keyed:
            sock.close()


def test_a_burst_of_honest_connections_inside_the_grace_does_not_close_itself(engine):
    with serve(engine, max_connections_per_client=2, header_timeout_s=WAIT_S, stranger_grace_s=WAIT_S) as server:
        first, second = connect(server), connect(server)
        time.sleep(0.2)
        answer = read_until_closed(connect(server))   # both still within their grace: the newcomer is refused
        assert answer.startswith(b"HTTP/1.1 503")
        for sock in (first, second):
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"200 OK" in sock.recv(65536)
            sock.close()


# ------------------------------------------------------------------------------------------ repeated log lines


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_repeated_log_record_is_written_once_then_with_a_count():
    clock = Clock()
    logger = logging.getLogger("test_server_flood.repeat")
    logger.propagate = False
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    logger.addFilter(RepeatFilter(window_s=60, clock=clock))
    try:
        for port in range(10_000):
            logger.warning("refused a connection from %s:%d", "10.0.0.7", port)
        logger.error("socket.accept() out of system resource")   # another kind: written
        assert [r.getMessage() for r in records] == ["refused a connection from 10.0.0.7:0",
                                                     "socket.accept() out of system resource"]
        clock.now += 61
        logger.warning("refused a connection from %s:%d", "10.0.0.7", 1)
        assert records[-1].getMessage() == ("refused a connection from 10.0.0.7:1 (and 9999 more like it in the "
                                            "60 s before, not logged)")
        clock.now += 61
        logger.warning("refused a connection from %s:%d", "10.0.0.8", 2)
        assert records[-1].getMessage() == "refused a connection from 10.0.0.8:2"   # nothing left out this time
        logger.warning("refused a connection from %s:%d", "10.0.0.8", 3)
        logger.warning("refused a connection from %s:%d", "10.0.0.8", 4)
        logger.filters[0].flush()                                                  # at shutdown
        assert records[-1].getMessage() == "2 more like 'refused a connection from 10.0.0.8:2' were not logged"
    finally:
        logger.removeHandler(handler)
        logger.filters.clear()


def test_rubric_serve_takes_the_connection_limits():
    from rubrics.cli import serve as serve_cli
    from rubrics.cli.main import build_parser

    args = build_parser().parse_args(["serve"])
    defaults = ConnectionLimits()
    assert serve_cli.connection_limits(args) == defaults   # the CLI repeats the library's defaults
    args = build_parser().parse_args(["serve", "--header-timeout", "2.5", "--max-connections", "9",
                                      "--max-connections-per-client", "3", "--body-timeout", "7",
                                      "--keep-alive-timeout", "1", "--log-repeat-window", "5"])
    assert serve_cli.connection_limits(args) == ConnectionLimits(2.5, 7, 1, 9, 3, 5)
    for bad in (["--header-timeout", "0"], ["--max-connections", "0"], ["--body-timeout", "nan"]):
        done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "serve", *bad], capture_output=True,
                              text=True, timeout=WAIT_S)
        assert done.returncode == 2 and "expected a positive" in done.stderr, done.stderr


def test_rubric_serve_steps_in_small_budgets_on_the_cpu():
    """A step cannot be interrupted: on the CPU a served step is short, so a client arriving mid-step waits little."""
    from rubrics.cli import serve as serve_cli
    from rubrics.cli.main import build_parser

    cpu = build_parser().parse_args(["serve"])
    assert (serve_cli.step_budget(cpu), serve_cli.long_prefill_tokens(cpu)) == (128, 16)
    cuda = build_parser().parse_args(["serve", "--device", "cuda"])
    assert (serve_cli.step_budget(cuda), serve_cli.long_prefill_tokens(cuda)) == (2048, 32)
    chosen = build_parser().parse_args(["serve", "--max-num-batched-tokens", "512", "--long-prefill-tokens", "64"])
    assert (serve_cli.step_budget(chosen), serve_cli.long_prefill_tokens(chosen)) == (512, 64)


def test_the_uvicorn_config_carries_the_limits():
    from judge_engine.server.connections import uvicorn_config

    config = uvicorn_config(object(), "127.0.0.1", 1, ConnectionLimits(keep_alive_s=3, max_connections=7))
    assert config.timeout_keep_alive == 3 and config.limit_concurrency == 8
    assert config.http.__name__ == "GuardedH11Protocol"


def test_rubric_serve_in_a_subprocess_closes_half_sent_requests_and_logs_refusals_once(
        tiny_llama, tmp_path):  # noqa: F811
    """The real `rubric serve` on the tiny checkpoint: a connection that never finishes its headers is closed,
    the connections over the per-client cap are refused with a 503, and the log says so once with a count."""
    from judge_engine.server.background import ServerProcess, free_port

    port = free_port()
    command = [sys.executable, "-m", "rubrics.cli.main", "serve", "--model", str(tiny_llama), "--port", str(port),
               "--served-model-name", MODEL, "--header-timeout", "0.5", "--max-connections-per-client", "4",
               "--log-repeat-window", "3600"]
    log = tmp_path / "serve.log"
    with ServerProcess(command, port, str(log)) as server:
        half = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        half.settimeout(WAIT_S)
        half.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0")
        assert read_until_closed(half) == b""
        with httpx.Client(base_url=server.url, timeout=WAIT_S) as http:   # one kept-alive connection of the four
            assert http.get("/health").status_code == 200
            held = []
            for _ in range(3):
                sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
                sock.settimeout(WAIT_S)
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                assert b"200 OK" in sock.recv(65536)
                held.append(sock)
            refused = []
            for _ in range(30):
                sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
                sock.settimeout(WAIT_S)
                refused.append(read_until_closed(sock))
                sock.close()
            assert all(answer.startswith(b"HTTP/1.1 503") for answer in refused)
            for sock in held:
                sock.close()
    text = log.read_text(errors="replace")
    assert text.count("refused a connection") == 2, text[-3000:]      # the first one, and at shutdown:
    assert "29 more like 'refused a connection: this client has 4 connections open" in text, text[-3000:]
    assert text.count("closed a connection that did not send its request headers") == 1, text[-3000:]
