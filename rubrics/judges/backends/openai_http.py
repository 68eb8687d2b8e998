"""One POST to an OpenAI-compatible server, retried with backoff inside a deadline.

Kept apart from the judge so that the fault behaviour (429, 5xx, dropped connections, hanging servers) is one
small piece with its own tests, and so the judge itself is only about prompts and verdicts.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class JudgeHTTPError(Exception):
    """A call that failed for good: the message is what ends up in the item's error field."""


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0
    # Retry-After can be large (a server draining); never wait longer than this for one hint.
    retry_after_cap_s: float = 60.0

    def backoff(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.retry_after_cap_s)
        # Full jitter spreads many grading workers that were throttled at the same moment.
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_message_from_body(response: httpx.Response) -> str:
    """The server's own words when it sends an OpenAI error body, else a short excerpt of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip() or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if body.get("detail"):
            return str(body["detail"])
    return str(body)[:200]


async def get_json(client: httpx.AsyncClient, url: str, *, deadline_s: float, policy: RetryPolicy,
                   headers: dict[str, str] | None = None) -> dict[str, Any]:
    return await request_json(client, "GET", url, None, deadline_s=deadline_s, policy=policy, headers=headers)


async def post_json(client: httpx.AsyncClient, url: str, payload: dict[str, Any], *, deadline_s: float,
                    policy: RetryPolicy, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return await request_json(client, "POST", url, payload, deadline_s=deadline_s, policy=policy, headers=headers)


async def request_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    payload: dict[str, Any] | None,
    *,
    deadline_s: float,
    policy: RetryPolicy,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Send the request and return the JSON body; retry what is worth retrying until the deadline.

    The deadline covers the whole call, retries and waits included, so one hanging server costs a grading run
    at most deadline_s per judge request instead of attempts * timeout.
    """
    started = time.monotonic()
    last_problem = "no attempt made"
    for attempt in range(policy.max_retries + 1):
        remaining = deadline_s - (time.monotonic() - started)
        if remaining <= 0:
            break
        retry_after_s: float | None = None
        try:
            sending = client.request(method, url, json=payload, headers=headers)
            response = await asyncio.wait_for(sending, timeout=remaining)
        except (asyncio.TimeoutError, httpx.TimeoutException):
            last_problem = f"no answer within the {deadline_s:g}s deadline"
            break
        except httpx.TransportError as exc:
            last_problem = f"connection error: {type(exc).__name__}: {exc}".rstrip(": ")
        else:
            if response.status_code < 400:
                try:
                    return response.json()
                except ValueError as exc:
                    raise JudgeHTTPError(
                        f"HTTP {response.status_code} with a body that is not JSON ({method} {url})") from exc
            problem = f"HTTP {response.status_code}: {error_message_from_body(response)}"
            if response.status_code not in RETRYABLE_STATUS:
                raise JudgeHTTPError(f"{problem} (the server rejected the request: {method} {url})")
            last_problem = problem
            retry_after_s = parse_retry_after(response.headers.get("retry-after"))
        if attempt == policy.max_retries:
            break
        wait = policy.backoff(attempt, retry_after_s)
        remaining = deadline_s - (time.monotonic() - started)
        if wait >= remaining:
            last_problem += f" (next retry in {wait:.1f}s would pass the {deadline_s:g}s deadline)"
            break
        await asyncio.sleep(wait)
    attempts = attempt + 1
    # The reason first: it is what a results table has room for.
    raise JudgeHTTPError(f"{last_problem} (gave up after {attempts} attempt{'s' if attempts > 1 else ''}: "
                         f"{method} {url})")
