"""OpenAI-style error bodies: {"error": {"message", "type", "param", "code"}} with a 4xx/5xx status."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.responses import JSONResponse

from judge_engine.server.protocol import ErrorBody, ErrorResponse


class OpenAIError(Exception):
    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, type=self.type, param=self.param, code=self.code)

    def body(self) -> dict:
        return ErrorResponse(error=ErrorBody(message=self.message, type=self.type, param=self.param,
                                             code=self.code)).model_dump()


def error_response(status: int, message: str, *, type: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None) -> JSONResponse:
    body = ErrorResponse(error=ErrorBody(message=message, type=type, param=param, code=code))
    return JSONResponse(body.model_dump(), status_code=status)


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
