"""Fault behaviour of the retrying POST, against a real local HTTP server (uvicorn in a thread)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from judge_engine.server.background import BackgroundServer, free_port
from rubrics.judges.backends.openai_http import JudgeHTTPError, RetryPolicy, parse_retry_after, post_json

FAST = RetryPolicy(max_retries=3, backoff_base_s=0.01, backoff_max_s=0.05)


class Script:
    """Answers each POST with the next scripted step; the last step repeats."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.calls: list[float] = []

    async def handle(self, request: Request):
        self.calls.append(time.monotonic())
        step = self.steps[min(len(self.calls) - 1, len(self.steps) - 1)]
        return await step(request)


def status(code: int, headers: dict[str, str] | None = None, message: str = "scripted"):
    async def respond(request: Request):
        return JSONResponse({"error": {"message": message, "type": "server_error", "param": None, "code": None}},
                            status_code=code, headers=headers)
    return respond


async def ok(request: Request):
    return JSONResponse({"echo": await request.json()})


async def hang(request: Request):
    await asyncio.sleep(30)
    return JSONResponse({})


@pytest.fixture
def scripted():
    servers = []

    def start(*steps) -> tuple[str, Script]:
        script = Script(*steps)
        server = BackgroundServer(Starlette(routes=[Route("/post", script.handle, methods=["POST"])])).start()
        servers.append(server)
        return server.url + "/post", script

    yield start
    for server in servers:
        server.stop()


def call(url: str, deadline_s: float = 5.0, policy: RetryPolicy = FAST) -> dict:
    async def run():
        async with httpx.AsyncClient() as client:
            return await post_json(client, url, {"x": 1}, deadline_s=deadline_s, policy=policy)
    return asyncio.run(run())


def test_429_then_success_is_retried_after_the_retry_after_delay(scripted):
    url, script = scripted(status(429, {"Retry-After": "0.3"}), ok)
    assert call(url) == {"echo": {"x": 1}}
    assert len(script.calls) == 2
    assert script.calls[1] - script.calls[0] >= 0.29


def test_5xx_is_retried_then_gives_up_with_the_server_message(scripted):
    url, script = scripted(status(500, message="model crashed"))
    with pytest.raises(JudgeHTTPError, match=r"^HTTP 500: model crashed \(gave up after 4 attempts: POST http"):
        call(url)
    assert len(script.calls) == 4


def test_a_4xx_that_retrying_cannot_fix_fails_at_once(scripted):
    url, script = scripted(status(400, message="bad field"))
    with pytest.raises(JudgeHTTPError, match=r"^HTTP 400: bad field \(the server rejected the request"):
        call(url)
    assert len(script.calls) == 1


def test_a_hanging_server_hits_the_deadline(scripted):
    url, script = scripted(hang)
    started = time.monotonic()
    with pytest.raises(JudgeHTTPError, match=r"^no answer within the 0.5s deadline \(gave up after 1 attempt: "):
        call(url, deadline_s=0.5)
    assert time.monotonic() - started < 3
    assert len(script.calls) == 1


def test_a_retry_after_beyond_the_deadline_stops_early(scripted):
    url, script = scripted(status(503, {"Retry-After": "10"}))
    started = time.monotonic()
    with pytest.raises(JudgeHTTPError, match=r"HTTP 503.*would pass the 2s deadline"):
        call(url, deadline_s=2.0)
    assert time.monotonic() - started < 1.5
    assert len(script.calls) == 1


def test_connection_errors_are_retried_then_reported():
    url = f"http://127.0.0.1:{free_port()}/post"   # nothing listens there
    with pytest.raises(JudgeHTTPError, match=r"^connection error: ConnectError.*gave up after 4 attempts"):
        call(url)


def test_retry_after_parses_seconds_and_http_dates():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert 0 <= parse_retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 5))) <= 6


def test_backoff_grows_and_is_capped():
    policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=4.0)
    assert 0.5 <= policy.backoff(0, None) <= 1.0
    assert 2.0 <= policy.backoff(3, None) <= 4.0
    assert policy.backoff(0, 3.0) == 3.0
    assert policy.backoff(0, 1e6) == policy.retry_after_cap_s
