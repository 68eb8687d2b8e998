"""The sandbox grade.sh runs in: bwrap, docker or a bare process, with limits, a workspace and a trampoline.

The types every runtime shares are in base.py; bwrap.py and docker.py implement them, and `make_sandbox` here picks
one, so imports run one way: this package -> the backends -> base.
"""
from __future__ import annotations

from rubrics.delivery.sandbox.base import Runtime, Sandbox


def make_sandbox(runtime: Runtime) -> Sandbox:
    # Lazy: a backend pulls in its seccomp, cgroup and process machinery, which only grading needs.
    if runtime == "bwrap":
        from rubrics.delivery.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox()
    if runtime == "docker":
        from rubrics.delivery.sandbox.docker import DockerSandbox

        return DockerSandbox()
    raise ValueError(f"unknown runtime {runtime!r} (bwrap or docker)")
