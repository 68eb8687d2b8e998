"""The host's end of the result channel: a pipe grade.sh's pytest writes each test's outcome to (see
result_channel_plugin), read as the run goes and checked line by line.

The key that signs the records travels on a second pipe, filled and closed by the host before grade.sh starts:
the plugin reads one copy at import, before any code of the attempt is imported, so a report file, the exit
status or a line printed cannot stand in for it. The channel is hostile input like the rest: at most
CHANNEL_LIMIT bytes are kept, lines of at most LINE_LIMIT bytes; a record with a wrong signature, out of order
or malformed ends the reading, and the problem is kept, since only code in the test process can have written it.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path

PLUGIN = "rubrics.delivery.sandbox.result_channel_plugin"
CHANNEL_FD_VAR = "RUBRIC_RESULT_FD"
KEY_FD_VAR = "RUBRIC_RESULT_KEY_FD"
KEY_BYTES = 32
KEY_COPIES = 16                 # one per pytest run a grade.sh makes; more runs than this go unrecorded
CHANNEL_LIMIT = 32 * 2**20
LINE_LIMIT = 2**20
# A test's outcomes from best to worst: phases of one test, and runs of one grade.sh, keep the worst.
SEVERITY = {status: rank for rank, status in enumerate(("passed", "skipped", "failed", "error"))}


def worse(status: str, other: str) -> str:
    return status if SEVERITY[status] >= SEVERITY[other] else other


@dataclass
class ChannelLog:
    """What the channel said: the pytest runs that started and ended, each test's outcome, what was wrong."""
    started: list[str] = field(default_factory=list)        # run ids, in order
    ended: dict[str, int] = field(default_factory=dict)     # run id -> pytest's exit status
    tests: dict[str, str] = field(default_factory=dict)     # node id -> status (the worst over runs)
    problems: list[str] = field(default_factory=list)

    @property
    def used(self) -> bool:
        """Whether the plugin ran at all: a grader without pytest, or not under it, leaves the channel empty."""
        return bool(self.started or self.problems)

    @property
    def unfinished(self) -> list[str]:
        return [run for run in self.started if run not in self.ended]


class _Reader:
    def __init__(self, key: bytes) -> None:
        self.key = key
        self.log = ChannelLog()
        self.next_seq: dict[str, int] = {}
        self.kept = 0
        self.line = bytearray()
        self.stopped = False   # a bad record ends the reading: what follows cannot be trusted either

    def add(self, chunk: bytes) -> None:
        if self.stopped:
            return
        self.kept += len(chunk)
        if self.kept > CHANNEL_LIMIT:
            return self._stop(f"the result channel carried more than {CHANNEL_LIMIT // 2**20} MiB")
        start = 0
        while not self.stopped and (end := chunk.find(b"\n", start)) >= 0:
            self.line += chunk[start:end]
            line, self.line = bytes(self.line), bytearray()
            self._record(line)
            start = end + 1
        self.line += chunk[start:]
        if len(self.line) > LINE_LIMIT:
            self._stop(f"a result channel line longer than {LINE_LIMIT} bytes")

    def close(self) -> None:
        if self.line and not self.stopped:
            self._stop("the result channel ended inside a record")

    def _stop(self, problem: str) -> None:
        self.stopped = True
        self.log.problems.append(problem)

    def _record(self, line: bytes) -> None:
        mac, _, payload = line.partition(b" ")
        expected = hmac.new(self.key, payload, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            return self._stop("a result channel record not signed with the run's key")
        try:
            record = json.loads(payload)
            run, seq, kind = record["run"], record["seq"], record["kind"]
        except (ValueError, TypeError, KeyError):
            return self._stop("a malformed result channel record")
        if not isinstance(run, str) or seq != self.next_seq.get(run, 0) or (seq == 0) != (kind == "start"):
            return self._stop(f"a result channel record out of order ({kind} #{seq})")
        if run in self.log.ended:
            return self._stop("a result channel record after its run ended")
        self.next_seq[run] = seq + 1
        if kind == "start":
            self.log.started.append(run)
        elif kind == "test" and isinstance(record.get("id"), str) and record.get("status") in SEVERITY:
            self.log.tests[record["id"]] = worse(record["status"], self.log.tests.get(record["id"], "passed"))
        elif kind == "end" and isinstance(record.get("exitstatus"), int):
            self.log.ended[run] = record["exitstatus"]
        else:
            self._stop(f"a malformed result channel record ({kind!r})")


class ResultChannel:
    """Made per grading run: the sandbox gets the write end and the key, grade.sh `environment`, then `collect`.

    Under bubblewrap both travel as inherited descriptors (`fds`). A container inherits none, so with `fifo`
    the write end is a named pipe at that path, made write-only once the host holds its read end, which the
    container opens (a process in it can add records there, never read them); the key then goes in as the
    container's standard input (`keys`), which its entry shell moves to a descriptor of its own.
    """

    def __init__(self, fifo: Path | None = None) -> None:
        self._reader = _Reader(secrets.token_bytes(KEY_BYTES))
        self.read_fd, self.write_fd = open_named_pipe(fifo) if fifo is not None else os.pipe()
        self.key_fd: int | None = None
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    @property
    def keys(self) -> bytes:
        """One copy of the key per pytest run: 512 bytes, within any pipe's buffer, so a write never blocks."""
        return self._reader.key * KEY_COPIES

    @property
    def fds(self) -> tuple[int, int]:
        if self.key_fd is None:
            self.key_fd, key_w = os.pipe()
            try:
                os.write(key_w, self.keys)
            finally:
                os.close(key_w)
        return self.write_fd, self.key_fd

    def environment(self, channel_fd: int | None = None, key_fd: int | None = None) -> dict[str, str]:
        """The variables grade.sh's pytest reads; the descriptors default to the inherited ones (`fds`)."""
        if channel_fd is None or key_fd is None:
            channel_fd, key_fd = self.fds
        return {"PYTEST_PLUGINS": PLUGIN, CHANNEL_FD_VAR: str(channel_fd), KEY_FD_VAR: str(key_fd)}

    def _drain(self) -> None:
        try:
            while chunk := os.read(self.read_fd, 65536):
                self._reader.add(chunk)   # keeps draining past a problem, so that no writer blocks
        except OSError:
            pass
        finally:
            os.close(self.read_fd)

    def collect(self, wait_s: float = 5.0) -> ChannelLog:
        """Once the sandbox is gone: close the host's copies, read to the end (every writer is dead by now)."""
        for fd in (self.write_fd, self.key_fd):
            try:
                if fd is not None:
                    os.close(fd)
            except OSError:
                pass
        self._thread.join(timeout=wait_s)
        if self._thread.is_alive():
            self._reader._stop("the result channel was still held open after the sandbox ended")
        else:
            self._reader.close()
        return self._reader.log


def open_named_pipe(path: Path) -> tuple[int, int]:
    """A named pipe's read end and a write end the host holds until `collect`, as with an anonymous pipe: the
    reader sees the end only once every writer, the host's included, is gone."""
    os.mkfifo(path, 0o600)
    read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # does not wait for a writer
    write_fd = os.open(path, os.O_WRONLY)
    os.set_blocking(read_fd, True)
    os.chmod(path, 0o222)   # from now on anyone may write (signed records or nothing), nobody may read
    return read_fd, write_fd
