"""Optional bearer-token check for the /v1 routes (`rubric serve --api-key`), as vLLM's --api-key does."""

from __future__ import annotations

import hmac
from typing import Any

from judge_engine.server.errors import error_response


def bearer(api_key: str) -> bytes:
    """The Authorization header value that carries `api_key`."""
    return f"Bearer {api_key}".encode()


def carries_key(headers: list[tuple[bytes, bytes]] | None, expected: bytes) -> bool:
    """Whether a request's headers (lower-cased names, as ASGI and h11 give them) carry the expected
    Authorization value; compared in constant time."""
    given = dict(headers or []).get(b"authorization", b"")
    return hmac.compare_digest(given, expected)


class BearerAuth:
    """Pure ASGI middleware: /v1/* needs `Authorization: Bearer <api_key>`; /health and /metrics stay open."""

    def __init__(self, app: Any, api_key: str):
        self.app = app
        self._expected = bearer(api_key)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and not self._authorized(scope):
            response = error_response(401, "invalid or missing API key: send 'Authorization: Bearer <key>'",
                                      type="authentication_error", code="invalid_api_key")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: dict) -> bool:
        return carries_key(scope.get("headers"), self._expected)
