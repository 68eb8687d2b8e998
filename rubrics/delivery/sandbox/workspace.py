"""Build an attempt's workspace (a snapshot copied, or a patch applied to the starting state) and put the
hidden tests back over whatever the attempt left in tests/.

Everything here reads attempt files without following symbolic links and within a size budget:
an attempt is untrusted input, and a link to /etc or a 50 GB file must cost nothing.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rubrics.delivery.runs.attempts import AttemptRef

START_DIR = "repo"          # the task's starting state: the repository at the task's commit
TESTS_DIR = "tests"
PATCH_LIMIT = 10 * 2**20
GIT_TIMEOUT_S = 60
FILE_LIMIT = 20_000
BYTE_LIMIT = 256 * 2**20
GIT_MEMORY = 1024 * 2**20           # address space of `git apply`: a bomb's inflation stops here
_BINARY_SIZE = re.compile(rb"^(?:literal|delta) (\d{1,20})\r?$", re.MULTILINE)
_FILE_HEADER = re.compile(rb"^diff --git ", re.MULTILINE)
# The paths a patch reads from: git checks `..` in the paths it writes, renames and deletes, not in a copy source,
# and the patch is applied on the host, so `copy from ../../../etc/shadow` would copy a host file into the workspace.
_SOURCE_HEADER = re.compile(rb"^(copy|rename) from (.*?)\r?$", re.MULTILINE)
# `git apply` runs as this child: limits set, then exec (no preexec_fn: grading runs in threads).
_LIMITED = ("import os, resource, sys\n"
            "mem, fsize, cpu = (int(a) for a in sys.argv[1:4])\n"
            "resource.setrlimit(resource.RLIMIT_AS, (mem, mem))\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))\n"
            "resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))\n"
            "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
            "os.execv(sys.argv[4], sys.argv[4:])\n")


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


class WorkspaceError(Exception):
    """The attempt cannot be turned into a workspace; the message says why, naming the file."""


@dataclass
class CopyBudget:
    files: int = FILE_LIMIT
    bytes: int = BYTE_LIMIT


def copy_tree(src: Path, dst: Path, budget: CopyBudget | None = None) -> None:
    """Regular files, folders and symbolic links (copied as links); anything else is refused."""
    budget = budget or CopyBudget()
    dst.mkdir(parents=True, exist_ok=True)
    stack = [(src, dst)]
    while stack:
        here, there = stack.pop()
        with os.scandir(here) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                target = there / entry.name
                info = entry.stat(follow_symlinks=False)
                budget.files -= 1
                if budget.files < 0:
                    raise WorkspaceError(f"{src}: more files than the workspace limit")
                if stat.S_ISLNK(info.st_mode):
                    os.symlink(os.readlink(entry.path), target)
                elif stat.S_ISDIR(info.st_mode):
                    target.mkdir()
                    stack.append((Path(entry.path), target))
                elif stat.S_ISREG(info.st_mode):
                    budget.bytes -= info.st_size
                    if budget.bytes < 0:
                        raise WorkspaceError(f"{entry.path}: workspace larger than {_mib(BYTE_LIMIT)}")
                    shutil.copyfile(entry.path, target, follow_symlinks=False)
                    os.chmod(target, 0o755 if info.st_mode & 0o111 else 0o644)
                else:
                    raise WorkspaceError(f"{entry.path}: not a regular file, folder or link")


def build_workspace(attempt: AttemptRef | None, start: Path, dst: Path) -> None:
    """attempt None: the untouched starting state (what validation's no-op run grades)."""
    if attempt is not None and attempt.kind == "snapshot":
        copy_tree(attempt.path, dst)
        return
    if not start.is_dir():
        raise WorkspaceError(f"{start}: the task has no starting state ({START_DIR}/ beside task.yaml)")
    copy_tree(start, dst)
    if attempt is not None:
        apply_patch(attempt.path, dst)


def apply_patch(patch: Path, workspace: Path) -> None:
    """`git apply` in a child bounded in memory, file size and CPU, after checking what the patch declares it
    will write; the workspace limits are checked again on what it did write."""
    size = patch.stat().st_size
    if size > PATCH_LIMIT:
        raise WorkspaceError(f"{patch}: {size} bytes, more than the {PATCH_LIMIT // 2**20} MiB a patch may have")
    if size == 0:
        return
    text = patch.read_bytes()
    check_declared(patch, text)
    check_sources(patch, text, workspace)
    git = shutil.which("git")
    if git is None:
        raise WorkspaceError("git not found: patches are applied with `git apply`")
    # The ceiling keeps git from taking an enclosing repository for the workspace's own.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CEILING_DIRECTORIES": str(workspace.parent),
           "HOME": str(workspace.parent), "LC_ALL": "C"}
    argv = [sys.executable, "-I", "-S", "-c", _LIMITED, str(GIT_MEMORY), str(BYTE_LIMIT), str(GIT_TIMEOUT_S),
            git, "apply", "--whitespace=nowarn", str(patch.resolve())]
    try:
        done = subprocess.run(argv, cwd=workspace, env=env, capture_output=True, text=True, errors="replace",
                              timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise WorkspaceError(f"{patch}: git apply took longer than {GIT_TIMEOUT_S}s") from None
    if done.returncode < 0 or any(sign in done.stderr.lower() for sign in ("out of memory", "file too large")):
        raise WorkspaceError(f"{patch}: git apply was stopped by its limits ({_mib(GIT_MEMORY)} of memory, "
                             f"{_mib(BYTE_LIMIT)} per file, {GIT_TIMEOUT_S}s of CPU)")
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1][:300]
        raise WorkspaceError(f"{patch}: does not apply to the starting state: {reason}")
    check_tree(workspace, patch)


def check_declared(patch: Path, text: bytes) -> None:
    """Refuse a patch whose binary hunks declare more than the workspace may hold, before anything inflates them."""
    files = len(_FILE_HEADER.findall(text))
    if files > FILE_LIMIT:
        raise WorkspaceError(f"{patch}: touches {files} files, more than the workspace limit of {FILE_LIMIT}")
    declared = 0
    for match in _BINARY_SIZE.finditer(text):
        declared += int(match.group(1))
        if declared > BYTE_LIMIT:
            line = text.count(b"\n", 0, match.start()) + 1
            raise WorkspaceError(f"{patch}:{line}: binary hunks declare more than {_mib(BYTE_LIMIT)} "
                                 "(the workspace limit); not inflated")


def check_sources(patch: Path, text: bytes, workspace: Path) -> None:
    """Refuse a patch whose copy or rename source leaves the workspace: an absolute path, a `..` part, or a path
    through (or to) a symbolic link of the workspace, which could point anywhere on the host."""
    for match in _SOURCE_HEADER.finditer(text):
        line = text.count(b"\n", 0, match.start()) + 1
        name = _unquoted(match.group(2))
        parts = name.split("/")
        where = f"{patch}:{line}: {match.group(1).decode()} from {name!r}"
        if name.startswith("/") or ".." in parts or not name or "\0" in name:
            raise WorkspaceError(f"{where} reads outside the workspace; not applied")
        for depth in range(1, len(parts) + 1):
            if (workspace.joinpath(*parts[:depth])).is_symlink():
                raise WorkspaceError(f"{where} reads through the link {'/'.join(parts[:depth])!r}, which may "
                                     "point outside the workspace; not applied")


def _unquoted(raw: bytes) -> str:
    """A path as git writes it in a header: plain, or in double quotes with C escapes (octal bytes, \\t, \\")."""
    if not raw.startswith(b'"') or not raw.endswith(b'"') or len(raw) < 2:
        return raw.decode("utf-8", errors="surrogateescape")
    body, out, i = raw[1:-1], bytearray(), 0
    simple = {ord("n"): b"\n", ord("t"): b"\t", ord('"'): b'"', ord("\\"): b"\\", ord("a"): b"\a", ord("b"): b"\b",
              ord("f"): b"\f", ord("r"): b"\r", ord("v"): b"\v"}
    while i < len(body):
        if body[i] == ord("\\") and i + 1 < len(body):
            if body[i + 1:i + 4].isdigit() and len(body[i + 1:i + 4]) == 3:
                out.append(int(body[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out += simple.get(body[i + 1], body[i:i + 2])
            i += 2
            continue
        out.append(body[i])
        i += 1
    return bytes(out).decode("utf-8", errors="surrogateescape")


def check_tree(root: Path, source: Path) -> None:
    """The workspace limits (files, bytes), on a tree already built: what a patch left, links not followed."""
    files, size = 0, 0
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                files += 1
                if files > FILE_LIMIT:
                    raise WorkspaceError(f"{source}: the workspace it makes has more than {FILE_LIMIT} files")
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(Path(entry.path))
                elif stat.S_ISREG(info.st_mode):
                    size += info.st_size
                    if size > BYTE_LIMIT:
                        raise WorkspaceError(f"{source}: the workspace it makes is larger than {_mib(BYTE_LIMIT)}")


def touched_tests(start: Path, workspace: Path, hidden: Path) -> list[str]:
    """Hidden test files the attempt changed, deleted or planted, compared with the starting state."""
    touched = []
    for path in sorted(p for p in hidden.rglob("*") if p.is_file()):
        rel = path.relative_to(hidden).as_posix()
        if _fingerprint(start, f"{TESTS_DIR}/{rel}") != _fingerprint(workspace, f"{TESTS_DIR}/{rel}"):
            touched.append(f"{TESTS_DIR}/{rel}")
    return touched


def _fingerprint(root: Path, rel: str) -> tuple[str, bytes] | None:
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        # A linked folder on the way could lead anywhere (/proc, /dev): the file counts as replaced.
        if (root.joinpath(*parts[:depth])).is_symlink():
            return "link", "/".join(parts[:depth]).encode()
    path = root.joinpath(*parts)
    try:
        info = path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link", os.readlink(path).encode()
    if not stat.S_ISREG(info.st_mode):
        return "other", b""
    if info.st_size > PATCH_LIMIT:
        return "large", str(info.st_size).encode()
    return "file", path.read_bytes()


def restore_tests(workspace: Path, hidden: Path) -> None:
    """tests/ becomes exactly the hidden tests: edits undone, deletions restored, planted files gone."""
    target = workspace / TESTS_DIR
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    copy_tree(hidden, target)
