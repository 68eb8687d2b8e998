"""A cap on request bodies (`rubric serve --max-request-bytes`): 413 with an OpenAI-style body.

Without it one client could post a 100 MB body that the server reads, parses and tokenizes in full before any
length check, holding gigabytes of memory. A declared Content-Length over the cap is refused before a byte of
the body is read; a chunked body is counted as it arrives and refused as soon as it passes the cap.
"""

from __future__ import annotations

from typing import Any

from judge_engine.server.errors import OpenAIError

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024


class RequestTooLarge(OpenAIError):
    def __init__(self, limit: int, size: int | None = None):
        got = f"{size} bytes" if size is not None else "more"
        super().__init__(413, f"the request body is {got}; this server accepts at most {limit} bytes "
                         f"(rubric serve --max-request-bytes)", code="request_too_large")


class BodyLimit:
    """Pure ASGI middleware: HTTP request bodies over `max_bytes` get a 413."""

    def __init__(self, app: Any, max_bytes: int):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await RequestTooLarge(self.max_bytes, declared).response()(scope, receive, send)
            return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Any) -> Any:
        received = 0

        async def counted() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # raised inside the handler's body read: the app's OpenAIError handler answers the 413
                    raise RequestTooLarge(self.max_bytes)
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

