"""An OpenAI-compatible HTTP server on one judge_engine LLMEngine (`rubric serve`).

app.py: the Starlette app and routes; engine_loop.py: the thread that drives the engine and feeds each request's
queue; protocol.py: request and response bodies in OpenAI's shapes; chat_encoding.py: chat messages to token
ids with contents kept out of special-token parsing; tokenization.py: prompts tokenized in worker threads after a
cheap length bound; limits.py: the request body cap (413); errors.py: error bodies and the 500 middleware;
logprobs.py: response pieces; background.py: servers on 127.0.0.1 in a thread or a subprocess (tests, benchmarks).
"""

from __future__ import annotations

from judge_engine.lazy_exports import lazy_getattr

__all__ = ["create_app", "ConnectionLimits", "install_repeat_filter", "uvicorn_config"]

# what an application needs to serve an engine, imported on first use: starlette and uvicorn only then
_EXPORTS = {
    "create_app": "judge_engine.server.app",
    "ConnectionLimits": "judge_engine.server.connections",
    "install_repeat_filter": "judge_engine.server.connections",
    "uvicorn_config": "judge_engine.server.connections",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS)
