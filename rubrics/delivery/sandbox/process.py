"""Run one sandbox command: a wall-time limit, a bounded tail of its output, and its whole process group killed.

Output is read while it is written and only the last bytes are kept, so an attempt that prints
gigabytes costs neither memory nor disk. Every line of it is also matched, as it goes by, against
pytest's closing summary ("2 failed, 2 passed in 0.03s"): what the runner printed before the tested
code could rewrite its report is kept however much is printed after it (see grade_attempt).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

_CHUNK = 65536
_LINE_LIMIT = 4096           # a longer line is no summary line
_SUMMARY_LIMIT = 16          # summary lines kept
_SUMMARY = re.compile(rb"^(?:=+ )?((?:\d+ [a-z]+)(?:, \d+ [a-z]+)*) in \d+(?:\.\d+)?s(?: \([0-9:.]+\))?(?: =+)?$")
_ANSI = re.compile(rb"\x1b\[[0-9;]*m")


@dataclass
class ProcessOutcome:
    exit_code: int | None        # None when killed for overrunning the wall time
    timed_out: bool
    wall_s: float
    log_tail: str
    status_line: str | None      # what the trampoline wrote on its status descriptor, when it got that far
    summaries: list[dict[str, int]] = field(default_factory=list)   # pytest summary lines seen, as counts


class _Tail:
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.data = bytearray()
        self.line = bytearray()
        self.summaries: list[dict[str, int]] = []

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.keep:
            del self.data[: len(self.data) - self.keep]
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._line(chunk[start:end])
            start = end + 1
        self._extend(chunk[start:])

    def _extend(self, part: bytes) -> None:
        if len(self.line) <= _LINE_LIMIT:
            self.line += part[: _LINE_LIMIT + 1 - len(self.line)]

    def _line(self, part: bytes) -> None:
        self._extend(part)
        line, self.line = bytes(self.line), bytearray()
        if len(line) > _LINE_LIMIT or len(self.summaries) >= _SUMMARY_LIMIT:
            return
        found = _SUMMARY.match(_ANSI.sub(b"", line).strip())
        if found:
            counts: dict[str, int] = {}
            for item in found.group(1).decode().split(", "):
                number, word = item.split(" ", 1)
                counts[word] = counts.get(word, 0) + int(number)
            self.summaries.append(counts)

    def text(self) -> str:
        return bytes(self.data[-self.keep:]).decode("utf-8", errors="replace")


def _drain(fd: int, tail: _Tail) -> None:
    try:
        while chunk := os.read(fd, _CHUNK):
            tail.add(chunk)
    except OSError:
        pass
    finally:
        os.close(fd)


def run_bounded(argv_for, wall_s: float, log_bytes: int, *, env: dict[str, str] | None = None,
                on_timeout=None, extra_fds: tuple[int, ...] = (), stdin_data: bytes = b"") -> ProcessOutcome:
    """argv_for(status_fd) -> argv: the command, told which descriptor carries the trampoline's status line.

    `on_timeout`, when given, is called before the process group is killed (docker stops its container).
    `extra_fds` are passed on too (the seccomp filter bwrap reads). `stdin_data` is the whole of the command's
    standard input (a few hundred bytes at most: the result channel's keys for a container), else it reads none.
    """
    out_r, out_w = os.pipe()
    status_r, status_w = os.pipe()
    argv = argv_for(status_w)
    tail = _Tail(log_bytes)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_data else subprocess.DEVNULL, stdout=out_w,
                                stderr=out_w, env=env, pass_fds=(status_w, *extra_fds), start_new_session=True,
                                close_fds=True)
    except OSError as exc:
        for fd in (out_r, out_w, status_r, status_w):
            os.close(fd)
        return ProcessOutcome(None, False, 0.0, f"cannot start {argv[0]}: {exc}", None)
    os.close(out_w)
    os.close(status_w)
    if proc.stdin is not None:
        _feed(proc.stdin, stdin_data)
    reader = threading.Thread(target=_drain, args=(out_r, tail), daemon=True)
    reader.start()
    status_tail = _Tail(256)
    status_reader = threading.Thread(target=_drain, args=(status_r, status_tail), daemon=True)
    status_reader.start()
    timed_out = False
    try:
        proc.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        if on_timeout is not None:
            on_timeout()
        _kill_group(proc)
    wall = time.monotonic() - started
    _kill_group(proc)   # bwrap is gone, but a helper it started in our group must not outlive the run
    reader.join(timeout=5)
    status_reader.join(timeout=5)
    status = status_tail.text().strip() or None
    return ProcessOutcome(None if timed_out else proc.returncode, timed_out, round(wall, 3), tail.text(), status,
                          tail.summaries)


def _feed(stdin, data: bytes) -> None:
    """Within a pipe's buffer, so the write does not wait on the command; one that exited at once is no error."""
    try:
        stdin.write(data)
        stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
