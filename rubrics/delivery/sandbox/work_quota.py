"""A disk quota on one grading's private folder (workspace, sealed tests, /report): a tmpfs of fixed size.

The sandbox binds the workspace and the report folder from the host, so what the attempt writes there
lands on the host's disk; RLIMIT_FSIZE bounds each file, not their number. Run as root, the folder is
a tmpfs of `disk_mb` mounted for the grading and unmounted after (its pages are charged to the memory
cgroup of whoever writes them). Unprivileged, nothing can be mounted on the host: the fallback is the
per-file limit and the workspace checks made before the sandbox starts.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from pathlib import Path

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_quota(folder: Path, size_mb: int) -> bool:
    """Mount a tmpfs of size_mb on the (empty) folder; False where this process may not mount."""
    if os.geteuid() != 0:
        return False
    try:
        libc = _libc()
    except OSError:
        return False
    options = f"size={size_mb}m,mode=0700".encode()
    done = libc.mount(b"tmpfs", os.fsencode(folder), b"tmpfs", _MS_NOSUID | _MS_NODEV, options)
    return done == 0


def release(folder: Path, mounted: bool) -> None:
    """Unmount (when mounted) and remove the folder and whatever is left in it."""
    if mounted:
        try:
            if _libc().umount2(os.fsencode(folder), _MNT_DETACH) != 0:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
