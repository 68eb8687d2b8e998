"""The harness's pytest plugin: each test's outcome, as the test itself ended, sent to the host over a pipe.

Loaded into grade.sh's pytest through PYTEST_PLUGINS (honoured with plugin autoload off and under `python -I`),
so it is imported before any conftest or test module, hence before any code of the attempt. At import it reads
a one-time key from a pipe the host filled and closes that pipe, takes the channel's write end and keeps it
from child processes, and removes both variables from the environment. Every record is an HMAC-signed,
sequence-numbered JSON line: the start of the run (written at import, before anything the attempt wrote can
run), one per test, the end of the session. A test's outcome is read from the raw call (`call.excinfo`), not
from the TestReport that code in the process can rewrite; the report may only make it worse (an xfail, a
strict xpass). Standard library and pytest only: it runs inside the sandbox, under the task's pytest.

Without the variables (a pytest started by a test, or outside the harness) it does nothing.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os

import pytest

# The host's side, standard library only (this module itself is imported by pytest alone: it imports pytest).
from rubrics.delivery.sandbox.result_channel import CHANNEL_FD_VAR, KEY_BYTES, KEY_FD_VAR, SEVERITY, worse


class _Channel:
    def __init__(self, fd: int, key: bytes) -> None:
        self.fd, self.key, self.seq = fd, key, 0
        self.run = os.urandom(8).hex()   # a grade.sh may run pytest more than once: each run numbers its own
        self.phases: dict[str, str] = {}

    def send(self, kind: str, **fields: object) -> None:
        payload = json.dumps({"run": self.run, "seq": self.seq, "kind": kind, **fields},
                             separators=(",", ":")).encode()
        self.seq += 1
        line = hmac.new(self.key, payload, hashlib.sha256).hexdigest().encode() + b" " + payload + b"\n"
        try:
            while line:
                line = line[os.write(self.fd, line):]
        except OSError:
            pass   # the host stopped reading: what it has is what it judges


def _open() -> _Channel | None:
    fd, key_fd = os.environ.pop(CHANNEL_FD_VAR, None), os.environ.pop(KEY_FD_VAR, None)
    if not (fd and key_fd and fd.isdigit() and key_fd.isdigit()):
        return None
    try:
        key = os.read(int(key_fd), KEY_BYTES)   # one copy of the key per pytest run; the host closed its end
        os.close(int(key_fd))
        os.set_inheritable(int(fd), False)      # a subprocess of a test gets no channel
    except OSError:
        return None
    if len(key) != KEY_BYTES:
        return None
    return _Channel(int(fd), key)


_channel = _open()
if _channel is not None:
    _channel.send("start", pid=os.getpid())


def _raw(call, when: str) -> str:
    if call.excinfo is None:
        return "passed"
    if call.excinfo.errisinstance(pytest.skip.Exception):
        return "skipped"
    return "failed" if when == "call" else "error"


def _reported(report) -> str:
    if report.outcome == "failed" and report.when != "call":
        return "error"
    return report.outcome if report.outcome in SEVERITY else "failed"


def _phase(raw: str, reported: str) -> str:
    """The raw outcome, unless the report says worse or calls a failure xfailed (skipped): never better."""
    if reported == "passed" and raw != "passed":
        return raw
    return reported


@pytest.hookimpl(hookwrapper=True, tryfirst=True)   # outermost: the report as every other plugin left it
def pytest_runtest_makereport(item, call):
    outcome = yield
    if _channel is None:
        return
    try:
        reported = _reported(outcome.get_result())
    except BaseException:   # noqa: BLE001 - a report that could not be made is no pass
        reported = "error"
    status = _phase(_raw(call, call.when), reported)
    _channel.phases[item.nodeid] = worse(status, _channel.phases.get(item.nodeid, "passed"))
    if call.when == "teardown":
        _channel.send("test", id=item.nodeid, status=_channel.phases.pop(item.nodeid))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    if _channel is not None:
        _channel.send("end", exitstatus=int(exitstatus), collected=int(session.testscollected))
