"""Limits on request bodies: a cap on each (`rubric serve --max-request-bytes`, 413) and a budget for large ones
(`--large-body-rate`, 429), with OpenAI-style bodies.

Without the cap one client could post a 100 MB body that the server reads, parses and tokenizes in full before
any length check, holding gigabytes of memory. A declared Content-Length over the cap is refused before a byte of
the body is read; a chunked body is counted as it arrives and refused as soon as it passes the cap.

The budget: reading and parsing a body holds the interpreter lock on the event loop, and the engine thread waits
for that lock between its matrix products, so a few clients posting 4 MiB bodies back to back slowed every other
client's requests eightfold (benchmarks/serve_floods.py). A body of up to FREE_BODY_BYTES (a whole context of text
fits) is never rationed; the bytes of larger bodies, all clients together, are drawn from a token bucket that
refills at `large_body_rate` bytes per second and holds at most one body of the cap. A large body the bucket
cannot pay for gets 429 with Retry-After, before it is read, after a pause (THROTTLE_DELAY_S).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

from judge_engine.server.errors import OpenAIError

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
FREE_BODY_BYTES = 64 * 1024     # 8,192 tokens of text take 30-40 KB of JSON: such a body is never rationed
# a refused large body's 429 waits this long at most (or until the budget could pay, if sooner), its body unread:
# a client that retries at once would otherwise keep the event loop busy accepting and refusing (measured: 640
# refusals a second from four clients, still 3.1x a probe's latency)
THROTTLE_DELAY_S = 1.0
DEFAULT_LARGE_BODY_RATE = 1024 * 1024   # bytes per second of larger bodies, all clients together


class RequestTooLarge(OpenAIError):
    def __init__(self, limit: int, size: int | None = None):
        got = f"{size} bytes" if size is not None else "more"
        super().__init__(413, f"the request body is {got}; this server accepts at most {limit} bytes "
                         f"(rubric serve --max-request-bytes)", code="request_too_large")


class LargeBodiesThrottled(OpenAIError):
    def __init__(self, retry_after_s: float, rate: float):
        super().__init__(429, f"too many large request bodies: this server reads at most {rate:.0f} bytes per "
                         f"second of bodies over {FREE_BODY_BYTES} bytes (rubric serve --large-body-rate); retry "
                         f"in {math.ceil(retry_after_s)} s", type="rate_limit_error", code="large_bodies_throttled")
        self.headers = {"Retry-After": str(math.ceil(retry_after_s))}


@dataclass
class LargeBodyBudget:
    """A token bucket of body bytes: refills at `rate` bytes per second up to `burst`."""
    rate: float
    burst: float
    clock: Any = time.monotonic
    level: float = field(init=False)
    updated: float = field(init=False)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"large_body_rate must be positive, got {self.rate}")
        self.level, self.updated = self.burst, self.clock()

    def take(self, size: int) -> float | None:
        """Pay for `size` bytes now (None), or the seconds until the bucket could (nothing is taken). A body
        larger than the bucket can ever hold pays when the bucket is full."""
        now = self.clock()
        self.level = min(self.burst, self.level + (now - self.updated) * self.rate)
        self.updated = now
        need = min(size, self.burst)
        if self.level < need:
            return (need - self.level) / self.rate
        self.level -= need
        return None


class BodyLimit:
    """Pure ASGI middleware: HTTP request bodies over `max_bytes` get a 413; the bytes of bodies over
    FREE_BODY_BYTES are paid from a LargeBodyBudget of `large_body_rate` bytes per second (429 when it is empty)."""

    def __init__(self, app: Any, max_bytes: int, large_body_rate: float = DEFAULT_LARGE_BODY_RATE):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.app = app
        self.max_bytes = max_bytes
        self.budget = LargeBodyBudget(large_body_rate, max(max_bytes, FREE_BODY_BYTES))

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await RequestTooLarge(self.max_bytes, declared).response()(scope, receive, send)
            return
        if declared is not None and declared > FREE_BODY_BYTES:
            wait = self.budget.take(declared - FREE_BODY_BYTES)
            if wait is not None:
                await asyncio.sleep(min(wait, THROTTLE_DELAY_S))
                await LargeBodiesThrottled(wait, self.budget.rate).response()(scope, receive, send)
                return
        await self.app(scope, self._counting(receive, paid=declared is not None), send)

    def _counting(self, receive: Any, paid: bool) -> Any:
        received = 0

        async def counted() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                size = len(message.get("body", b""))
                received += size
                if received > self.max_bytes:
                    # raised inside the handler's body read: the app's OpenAIError handler answers the 413
                    raise RequestTooLarge(self.max_bytes)
                over = min(size, received - FREE_BODY_BYTES)
                if not paid and over > 0:   # a chunked body pays for its bytes past the free ones as they come
                    wait = self.budget.take(over)
                    if wait is not None:
                        raise LargeBodiesThrottled(wait, self.budget.rate)
            return message

        return counted


def _content_length(scope: dict) -> int | None:
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None

