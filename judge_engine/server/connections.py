"""Connection-level limits of `rubric serve` (uvicorn, h11), and logging that a flood cannot grow without bound.

Without them, 20,000 connections that each send half their headers hold 20,000 file descriptors for ever: /health
times out, accept() fails with EMFILE, and every failure writes a log line. So:

- **header timeout**: a connection has `header_timeout_s` from its start (or from the end of its previous
  response) to send a complete request line and headers; then it is closed. uvicorn has no such timeout (its
  keep-alive timeout stops at the first byte of a request).
- **body timeout**: a request body must arrive whole within `body_timeout_s` of its headers; then the connection
  is closed, and the handler sees a disconnect.
- **connection caps**: at most `max_connections` open connections in all and `max_connections_per_client` from one
  client address; a connection over either cap is answered 503 at once and closed, so it holds its descriptor
  for microseconds. uvicorn's own `limit_concurrency` (503 for a request once that many connections or tasks
  are active; set one above `max_connections`, for requests pipelined on open connections) and
  `timeout_keep_alive` (`keep_alive_s`, an idle connection between requests) are set from the same limits.
- **strangers give way**: a connection is a stranger until it has sent a whole request's headers (carrying the
  API key, when the server has one). A stranger holds a slot only until somebody needs it: a new connection that
  would be over a cap first closes the oldest stranger of the same cap (of its own address for the per-client
  cap) that has been open at least `stranger_grace_s`, and is refused only when there is none. So idle
  connections that never authenticate, however many addresses open them, cannot keep out a client that
  authenticates, nor another client of their own address; the grace keeps a burst of honest connections, accepted
  before any of them could send its headers, from closing each other.
- **repeated log records** (the same logger, level and message template) are written once per
  `log_repeat_window_s`; the next one written after the window says how many were left out, and so does one
  line per kind at shutdown (RepeatFilter.flush).
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from judge_engine.server.auth import bearer, carries_key

log = logging.getLogger("judge_engine.server")

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 60.0
DEFAULT_KEEP_ALIVE_S = 5.0
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 128
DEFAULT_LOG_REPEAT_WINDOW_S = 60.0
DEFAULT_STRANGER_GRACE_S = 1.0
# the loggers a flood writes to: uvicorn's (bad requests, 503s), asyncio's (accept failing with EMFILE), ours
FLOOD_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio", "judge_engine.server")


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    log_repeat_window_s: float = DEFAULT_LOG_REPEAT_WINDOW_S
    stranger_grace_s: float = DEFAULT_STRANGER_GRACE_S

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_s", "log_repeat_window_s", "stranger_grace_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("max_connections", "max_connections_per_client"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _refusal(message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "server_error", "param": None,
                                 "code": "too_many_connections"}}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


class Strangers:
    """The open connections that have not yet sent a whole request's headers with the server's key: oldest first,
    in all and per client address, so that a connection that needs a slot can close the oldest one."""

    def __init__(self) -> None:
        self._all: OrderedDict[Any, float] = OrderedDict()            # connection -> when it was opened
        self._by_host: dict[Any, OrderedDict[Any, float]] = {}

    def add(self, connection: Any, host: Any, opened: float) -> None:
        self._all[connection] = opened
        self._by_host.setdefault(host, OrderedDict())[connection] = opened

    def discard(self, connection: Any, host: Any) -> None:
        self._all.pop(connection, None)
        mine = self._by_host.get(host)
        if mine is not None:
            mine.pop(connection, None)
            if not mine:
                del self._by_host[host]

    def oldest(self, opened_before: float, host: Any = None) -> Any | None:
        """The oldest stranger (of `host`, when given) opened before `opened_before`, or None."""
        queue = self._all if host is None else self._by_host.get(host, {})
        for connection, opened in queue.items():
            return connection if opened < opened_before else None
        return None


def guarded_protocol(limits: ConnectionLimits, api_key: str | None = None) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with the header and body timeouts and the connection caps of `limits`; one
    class per server (it holds that server's count of connections per client and its strangers). With api_key, a
    connection stops being a stranger with its first request that carries `Authorization: Bearer <api_key>`."""
    per_client: dict[Any, int] = {}
    strangers = Strangers()
    expected = bearer(api_key) if api_key else None

    class GuardedH11Protocol(H11Protocol):
        _limits = limits
        _per_client = per_client

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._counted = False
            self._stranger = False
            self._read_timer: Any = None
            host = self.client[0] if self.client else None
            if len(self.connections) > limits.max_connections and not self._make_room(None):
                self._refuse(f"the server has {limits.max_connections} connections open, its limit "
                             "(rubric serve --max-connections); retry later")
                return
            if (host is not None and per_client.get(host, 0) >= limits.max_connections_per_client
                    and not self._make_room(host)):
                self._refuse(f"this client has {limits.max_connections_per_client} connections open, the limit "
                             "per client (rubric serve --max-connections-per-client); reuse them or retry later")
                return
            if host is not None:
                per_client[host] = per_client.get(host, 0) + 1
                self._counted = True
            strangers.add(self, host, self.loop.time())
            self._stranger = True
            self._arm(limits.header_timeout_s, "did not send its request headers")

        def _make_room(self, host: Any) -> bool:
            """Close the oldest stranger past its grace (of `host`, or of the whole server): True if one was."""
            victim = strangers.oldest(self.loop.time() - limits.stranger_grace_s, host)
            if victim is None:
                return False
            log.warning("closed a connection that had sent no %s to make room for a new one",
                        "request with the API key" if expected else "request headers")
            victim._forget_stranger()
            victim.transport.close()
            return True

        def _forget_stranger(self) -> None:
            if getattr(self, "_stranger", False):
                strangers.discard(self, self.client[0] if self.client else None)
                self._stranger = False

        def _introduced(self) -> bool:
            """Whether the request whose headers have arrived makes this connection known to the server."""
            if self.headers is None:
                return False
            return expected is None or carries_key(self.headers, expected)

        def _refuse(self, message: str) -> None:
            log.warning("refused a connection: %s", message)
            self.transport.write(_refusal(message))
            self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._forget_stranger()
            if getattr(self, "_counted", False):
                host = self.client[0]
                left = per_client.get(host, 1) - 1
                if left > 0:
                    per_client[host] = left
                else:
                    per_client.pop(host, None)
                self._counted = False
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            before = self.conn.their_state
            super().data_received(data)
            if self.transport.is_closing():
                return
            if self._stranger and self._introduced():
                self._forget_stranger()
            state = self.conn.their_state
            if state is h11.SEND_BODY and before is not h11.SEND_BODY:
                self._arm(limits.body_timeout_s, "did not send its request body")
            elif state is h11.IDLE and self._read_timer is None:   # a next request begun on a kept-alive connection
                self._arm(limits.header_timeout_s, "did not send its request headers")
            elif state is not h11.IDLE and state is not h11.SEND_BODY:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._disarm()   # uvicorn's keep-alive timer runs until the next request's first byte

        def _arm(self, seconds: float, what: str) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(seconds, self._timed_out, seconds, what)

        def _disarm(self) -> None:
            timer = getattr(self, "_read_timer", None)
            if timer is not None:
                timer.cancel()
                self._read_timer = None

        def _timed_out(self, seconds: float, what: str) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            log.warning("closed a connection that %s within %g s", what, seconds)
            self.transport.close()

    return GuardedH11Protocol


class RepeatFilter(logging.Filter):
    """Lets the first record of a kind (logger, level, message template) through, drops the same kind for
    `window_s`, and marks the first one after the window with how many were dropped."""

    MAX_KINDS = 1024

    def __init__(self, window_s: float = DEFAULT_LOG_REPEAT_WINDOW_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.window_s = window_s
        self.clock = clock
        self._kinds: OrderedDict[tuple, list] = OrderedDict()   # kind -> [window start, records dropped]

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.window_s:
            seen[1] += 1
            return False
        if seen is not None and seen[1]:
            record.msg = (f"{record.getMessage()} (and {seen[1]} more like it in the {self.window_s:g} s before, "
                          "not logged)")
            record.args = None
        self._kinds[kind] = [now, 0, record.getMessage()]
        self._kinds.move_to_end(kind)
        while len(self._kinds) > self.MAX_KINDS:
            self._kinds.popitem(last=False)
        return True

    def flush(self) -> None:
        """Log, for each kind with records dropped since its last one written, how many (at shutdown)."""
        for (name, level, _), seen in list(self._kinds.items()):
            if seen[1]:
                logging.getLogger(name).log(level, "%d more like %r were not logged", seen[1], seen[2][:200])
                seen[1] = 0


def install_repeat_filter(window_s: float = DEFAULT_LOG_REPEAT_WINDOW_S,
                          loggers: tuple[str, ...] = FLOOD_LOGGERS) -> RepeatFilter:
    """One RepeatFilter on each of the loggers a flood writes to (a filter on a logger sees the records logged
    on it; uvicorn's and asyncio's records are logged on these names themselves)."""
    repeat = RepeatFilter(window_s)
    for name in loggers:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, RepeatFilter)]:
            logger.removeFilter(old)
        logger.addFilter(repeat)
    return repeat


def uvicorn_config(app: Any, host: str, port: int, limits: ConnectionLimits | None = None,
                   api_key: str | None = None, **options: Any) -> Any:
    """A uvicorn.Config for `app` with the limits' timeouts, caps, limit_concurrency and keep-alive, on h11 (the
    protocol the guards are written for); api_key: the key `app` asks for, which makes a connection known."""
    import uvicorn

    limits = limits or ConnectionLimits()
    # limit_concurrency: uvicorn answers 503 to a request once that many connections or tasks are active; the
    # connection cap already refuses the connection past max_connections, so uvicorn's limit sits one above it
    # and catches what the cap cannot see (requests pipelined on open connections)
    return uvicorn.Config(app, host=host, port=port, http=guarded_protocol(limits, api_key), loop="asyncio",
                          timeout_keep_alive=limits.keep_alive_s, limit_concurrency=limits.max_connections + 1,
                          **options)
