"""The Docker runtime's entry shell, the container's first process, and the status line it writes back.

It reads a proof from standard input, hands the key copies that follow to descriptor 3 and the result channel's
named pipe to 4 (the descriptors the harness's pytest plugin reads, as under bubblewrap), runs grade.sh as its
child with the status pipe closed, then counts the processes grade.sh left running (every process but itself that
is not a zombie, as bubblewrap's trampoline counts) and writes `PROOF EXIT_CODE LEFT` to the status pipe. POSIX sh
builtins only, so that any image with a /bin/sh runs it. Anything in the container may write to that pipe too,
so only the line with this run's proof counts (StatusPipe).
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

from rubrics.delivery.sandbox.result_channel import open_named_pipe

CHANNEL_DIR = "/rubric-channel"
CHANNEL_FIFO = "results"
STATUS_FIFO = "status"
KEY_FD, CHANNEL_FD, STATUS_FD = 3, 4, 5
STATUS_LINE_LIMIT = 256
# Run as `sh -c ENTRY /task/grade.sh`.
ENTRY = f"""IFS= read -r proof
exec {KEY_FD}<&0 </dev/null {STATUS_FD}>{CHANNEL_DIR}/{STATUS_FIFO}
if [ -p {CHANNEL_DIR}/{CHANNEL_FIFO} ]; then exec {CHANNEL_FD}>{CHANNEL_DIR}/{CHANNEL_FIFO}; fi
"$0" {STATUS_FD}>&-
code=$?
exec {KEY_FD}<&- {CHANNEL_FD}>&-
left=0
for process in /proc/[0-9]*; do
  [ "$process" = /proc/$$ ] && continue
  {{ IFS= read -r stat < "$process/stat"; }} 2>/dev/null || continue
  set -- ${{stat##*)}}
  case "$1" in Z|X) ;; *) left=$((left + 1)) ;; esac
done
echo "$proof $code $left" >&{STATUS_FD}
exit "$code"
"""


class StatusPipe:
    """The entry shell's `PROOF EXIT_CODE LEFT` line, read from a named pipe as it comes: lines without this run's
    proof (anything in the container may write there) and lines longer than STATUS_LINE_LIMIT are passed over,
    so a flood of them neither hides the shell's line nor costs memory."""

    def __init__(self, path: Path, proof: str) -> None:
        self.proof = proof.encode()
        self.left: int | None = None
        self.read_fd, self.write_fd = open_named_pipe(path)
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        line, overlong = bytearray(), False
        try:
            while chunk := os.read(self.read_fd, 65536):
                *complete, rest = chunk.split(b"\n")
                for piece in complete:
                    if not overlong and len(line) + len(piece) <= STATUS_LINE_LIMIT:
                        self._line(bytes(line + piece))
                    line, overlong = bytearray(), False
                line += rest
                if len(line) > STATUS_LINE_LIMIT:
                    line, overlong = bytearray(), True
        except OSError:
            pass
        finally:
            os.close(self.read_fd)

    def _line(self, line: bytes) -> None:
        parts = line.split()
        if self.left is None and len(parts) == 3 and parts[0] == self.proof and parts[2].isdigit():
            self.left = int(parts[2])

    def collect(self, wait_s: float = 5.0) -> int | None:
        """Once the container is gone: the processes grade.sh left, or None where the shell never said (killed)."""
        os.close(self.write_fd)
        self._thread.join(timeout=wait_s)
        return self.left
