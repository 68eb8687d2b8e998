"""OpenAI-style error bodies: {"error": {"message", "type", "param", "code"}} with a 4xx/5xx status, and the
middleware that turns unexpected exceptions into such a 500 without dropping the connection."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse

from judge_engine.server.protocol import ErrorBody, ErrorResponse

log = logging.getLogger(__name__)


class OpenAIError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers: dict[str, str] = {}   # e.g. Retry-After on a 429

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, type=self.type, param=self.param, code=self.code,
                              headers=self.headers)

    def body(self) -> dict:
        return ErrorResponse(error=ErrorBody(message=self.message, type=self.type, param=self.param,
                                             code=self.code)).model_dump()


def error_response(status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    body = ErrorResponse(error=ErrorBody(message=message, type=type, param=param, code=code))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def from_validation_error(error: ValidationError) -> OpenAIError:
    """The first problem, named by its field path (`messages.0.role`), as OpenAI names `param`."""
    first = error.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        message = f"{param} is required"
    elif param:
        message = f"{param}: {message}"
    extra = len(error.errors()) - 1
    if extra:
        message += f" (and {extra} more problem{'s' if extra > 1 else ''})"
    return OpenAIError(400, message, param=param, code="invalid_value" if first["type"] != "missing" else None)


class InternalErrors:
    """Pure ASGI middleware: an unexpected exception becomes a plain 500 response with an OpenAI-style body.

    Starlette's own handler for `Exception` sends the 500 and then re-raises, and uvicorn answers a re-raised
    exception by closing the connection, so a client's next kept-alive request on it failed. Here the exception
    is logged and the exchange ends normally. Once a response has started (a stream) nothing can be sent in its
    place; the exception is re-raised and the server closes the connection, the only signal left.
    """

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - every unexpected failure must still answer the request
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            if started:
                raise
            await internal_error_response(exc)(scope, receive, send)


def internal_error_response(exc: BaseException) -> JSONResponse:
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")
