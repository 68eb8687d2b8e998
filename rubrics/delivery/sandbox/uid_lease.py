"""A sandbox uid that no other grading on this machine holds while this one runs.

Run as root, grade.sh runs under a uid of its own, and the end of a run kills whatever that uid left behind
(bwrap._kill_uid) while the process limit counts its processes. The slot alone (0 .. --jobs-1) would give two
`rubric tasks run` started side by side the same uids, so one run's end would kill the other's grading. Each uid
is leased with a lock on a file of its own in a root-only folder; the kernel drops the lock when its holder exits,
however it exits, so a crashed run never keeps a uid.
"""
from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rubrics.delivery.sandbox.base import SandboxUnavailable

UID_BASE = 1_950_000_000   # far above any uid a system hands out, so no real user shares one
UIDS = 65_536
LEASES = Path("/run/rubric-sandbox-uids")


@contextmanager
def leased_uid(preferred: int, leases: Path = LEASES) -> Iterator[int]:
    """The first free uid from UID_BASE + preferred on (the slot, so that one run alone keeps its uids)."""
    leases.mkdir(mode=0o700, parents=True, exist_ok=True)
    for offset in range(UIDS):
        number = (preferred + offset) % UIDS
        fd = os.open(leases / str(number), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield UID_BASE + number
        finally:
            os.close(fd)
        return
    raise SandboxUnavailable(f"all {UIDS} sandbox uids are leased (lock files in {leases})")
