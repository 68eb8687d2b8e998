"""The bubblewrap runtime: no network, a read-only system, the workspace the only lasting writable place.

As root, bwrap mounts as root and the trampoline drops grade.sh to a uid that no other grading on the machine
holds meanwhile (uid_lease.py), which makes the process limit (RLIMIT_NPROC) hold: the kernel
does not apply it to root, nor in a user namespace that root created. Unprivileged, bwrap makes a
user namespace and the limit counts the caller's own processes too, so it is raised by their number.

The whole tree runs in a cgroup capped at the memory limit where one can be made (cgroup.py);
/tmp is a tmpfs of `tmp_mb`; no process inside may make a user namespace (bwrap's --disable-userns
unprivileged, a seccomp filter as root, where bwrap makes none to disable).

grade.sh's pytest loads the harness's result-channel plugin (result_channel*.py): the two pipes pass through
bwrap and the trampoline as inherited descriptors, and the `rubrics` package is mounted read-only at its own
path where the interpreter's prefixes do not already hold it (an editable install).
"""
from __future__ import annotations

import os
import shutil
import signal
import stat
import sys
from pathlib import Path, PurePosixPath

from rubrics.delivery.sandbox.base import (
    GRADER,
    REPO,
    REPORT,
    SEALED_TESTS,
    TASK,
    SandboxOutcome,
    SandboxRequest,
    SandboxUnavailable,
    environment,
    parse_status,
)
from rubrics.delivery.sandbox.cgroup import ENTER, TreeCap
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.process import run_bounded
from rubrics.delivery.sandbox.result_channel import ResultChannel
from rubrics.delivery.sandbox.seccomp import filter_fd, no_userns_filter
from rubrics.delivery.sandbox.trampoline import SOURCE
from rubrics.delivery.sandbox.uid_lease import leased_uid

_SYSTEM_LINKS = ("/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives")


class BwrapSandbox:
    runtime = "bwrap"

    def __init__(self, bwrap: str | None = None) -> None:
        found = bwrap or shutil.which("bwrap")
        if found is None:
            raise SandboxUnavailable("bwrap not found: install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)")
        self.bwrap = found
        self.options = _options(found)
        # A setuid bwrap refuses --size to a caller that is not root; an old one (before 0.8) has no --size.
        # Without it /tmp is bounded by the process tree's memory cap only (tmpfs pages are charged to it).
        setuid = bool(os.stat(found).st_mode & stat.S_ISUID)
        self.size_tmp = "--size" in self.options and not (setuid and os.geteuid() != 0)

    def run(self, request: SandboxRequest, limits: SandboxLimits) -> SandboxOutcome:
        if os.geteuid() != 0:
            return self._run(request, limits, -1)
        try:
            with leased_uid(request.slot) as uid:
                return self._run(request, limits, uid)
        except (SandboxUnavailable, OSError) as exc:
            return SandboxOutcome(None, False, 0.0, "", None, f"no sandbox uid: {exc}")

    def _run(self, request: SandboxRequest, limits: SandboxLimits, uid: int) -> SandboxOutcome:
        """`uid`: grade.sh's, leased for this run; -1 when not root (bwrap then makes a user namespace)."""
        privileged = uid >= 0
        if privileged:
            _give_to(uid, request.workspace, request.report_dir)
        nproc = limits.processes if privileged else limits.processes + _own_processes()
        program = no_userns_filter()
        seccomp = filter_fd(program) if program is not None else None
        cap = TreeCap.make(limits.memory_mb * 2**20)
        channel = ResultChannel()

        def argv(status_fd: int) -> list[str]:
            trampoline = [sys.executable, "-I", "-S", "-c", SOURCE, str(uid), str(nproc),
                          str(limits.memory_mb * 2**20), str(limits.file_mb * 2**20), str(status_fd),
                          f"{TASK}/{GRADER}"]
            command = [self.bwrap, *bwrap_arguments(request, privileged, limits, seccomp,
                                                    "--disable-userns" in self.options, self.size_tmp,
                                                    channel.environment()),
                       *trampoline]
            if cap is not None:
                command = [sys.executable, "-I", "-S", "-c", ENTER, str(cap.procs_file), *command]
            return command

        killed = False
        try:
            outcome = run_bounded(argv, limits.wall_s, limits.log_bytes,
                                  extra_fds=channel.fds + (() if seccomp is None else (seccomp,)))
        finally:
            log = channel.collect()
            if seccomp is not None:
                os.close(seccomp)
            if cap is not None:
                killed = cap.oom_killed()
                cap.close()
        if privileged:
            _kill_uid(uid)
        exit_code, left = parse_status(outcome.status_line)
        error = None
        if exit_code is None and not outcome.timed_out:
            error = f"bwrap exited with {outcome.exit_code} before grade.sh finished"
        if killed and error is not None:
            error = None    # the cap killed the trampoline or bwrap too: the attempt ran out of memory
        return SandboxOutcome(exit_code=exit_code, timed_out=outcome.timed_out, wall_s=outcome.wall_s,
                              log_tail=outcome.log_tail, left_processes=left, sandbox_error=error,
                              memory_killed=killed, summaries=tuple(outcome.summaries), channel=log)


def bwrap_arguments(request: SandboxRequest, privileged: bool, limits: SandboxLimits | None = None,
                    seccomp_fd: int | None = None, disable_userns: bool = True, size_tmp: bool = True,
                    extra_env: dict[str, str] | None = None) -> list[str]:
    """`extra_env`: the result channel's variables (PYTEST_PLUGINS and its descriptors)."""
    limits = limits or SandboxLimits()
    args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if privileged:
        # Only what the trampoline needs to hand grade.sh to the sandbox uid; that drops these too.
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user"]
        if disable_userns:
            args += ["--disable-userns"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--ro-bind", "/usr", "/usr"]
    for link in _SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    # The fresh /tmp first: bwrap mounts in order, and an interpreter that lives under /tmp (a CI checkout's
    # virtual environment) must be mounted on top of it, not hidden by it.
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777"]
    if size_tmp:
        args += ["--size", str(limits.tmp_mb * 2**20)]
    args += ["--tmpfs", "/tmp"]
    prefixes = _python_prefixes()
    package = _package_dirs(prefixes)
    args += _parent_dirs([*prefixes, *package, SEALED_TESTS])
    for prefix in [*prefixes, *package]:
        args += ["--ro-bind", prefix, prefix]
    args += ["--bind", str(request.workspace), REPO,
             "--ro-bind", str(request.sealed_tests), SEALED_TESTS,
             "--ro-bind", str(request.task_dir), TASK,
             "--bind", str(request.report_dir), REPORT]
    if (request.task_dir / "solution.patch").exists():
        args += ["--ro-bind", "/dev/null", f"{TASK}/solution.patch"]   # the reference fix is not the attempt's
    args += ["--chdir", REPO, "--clearenv"]
    path = ":".join(dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]))
    for key, value in {**environment(), **(extra_env or {}), "PATH": path}.items():
        args += ["--setenv", key, value]
    return args


def _options(bwrap: str) -> set[str]:
    """The options this bwrap knows (--size and --disable-userns are recent)."""
    import re
    import subprocess

    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(re.findall(r"--[a-z][a-z0-9-]*", shown.stdout + shown.stderr))


def _python_prefixes() -> list[str]:
    """The interpreter running this command, with its environment, is the one grade.sh finds on PATH."""
    found = []
    for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        real = os.path.realpath(prefix)
        for path in dict.fromkeys([prefix, real]):
            if not path.startswith("/usr/") and path != "/usr" and path not in found:
                found.append(path)
    # A prefix inside another one is already mounted with it.
    return [p for p in found if not any(p != q and p.startswith(q + "/") for q in found)]


def _package_dirs(prefixes: list[str]) -> list[str]:
    """The folder of this `rubrics` package, where the prefixes do not hold it (an editable install): grade.sh's
    pytest imports the result channel's plugin from it, at the path the environment's import hooks name."""
    import rubrics

    here = os.path.dirname(os.path.abspath(rubrics.__file__))
    found = []
    for path in dict.fromkeys([here, os.path.realpath(here)]):
        if not any(path == p or path.startswith(p + "/") for p in prefixes):
            found.append(path)
    return found


def _parent_dirs(paths: list[str]) -> list[str]:
    """bwrap creates missing parents as root-only (0700); the sandbox uid must be able to pass through them."""
    args: list[str] = []
    made: set[str] = set()
    for path in paths:
        for parent in reversed(PurePosixPath(path).parents):
            name = str(parent)
            if name == "/" or name in made:
                continue
            made.add(name)
            args += ["--perms", "0755", "--dir", name]
    return args


def _give_to(uid: int, *roots: Path) -> None:
    for root in roots:
        os.chown(root, uid, uid, follow_symlinks=False)
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def _own_processes() -> int:
    uid = os.getuid()
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                pass
    return count


def _kill_uid(uid: int) -> None:
    """The pid namespace is gone with bwrap, so nothing should be left; a process that is, is killed."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                os.kill(int(name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
