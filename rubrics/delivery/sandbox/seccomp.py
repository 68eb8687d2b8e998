"""A seccomp filter that refuses new user namespaces inside the sandbox (bwrap --seccomp FD).

Unprivileged, bwrap's own --disable-userns does this; run as root, bwrap makes no user namespace
(the sandbox uid must be a real one for the process limit to hold) and cannot, so this filter is what
stops `unshare -Ur` there: unshare() and clone() with CLONE_NEWUSER fail with EPERM, and clone3()
(whose flags a classic BPF filter cannot read) with ENOSYS, which makes the C library fall back to
clone(). Calls through another ABI (i386 compat, x32) fail with ENOSYS: their numbers differ and a
filter that let them through would let `unshare` through. Architectures other than x86-64 and arm64
get no filter (the caller says so).
"""
from __future__ import annotations

import os
import platform
import struct

CLONE_NEWUSER = 0x10000000
_EPERM, _ENOSYS = 1, 38
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_X32_BIT = 0x40000000
# machine: (AUDIT_ARCH_*, unshare, clone, clone3)
_ARCHES = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435),
           "arm64": (0xC00000B7, 97, 220, 435)}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def no_userns_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine, or None where it has no syscall table here."""
    entry = _ARCHES.get(machine or platform.machine())
    if entry is None:
        return None
    arch, unshare, clone, clone3 = entry
    program = [
        _insn(_LD_ABS, _ARCH),
        _insn(_JEQ, arch, 0, 7),              # another ABI (i386 compat): every call -> ENOSYS
        _insn(_LD_ABS, _NR),
        _insn(_JGE, _X32_BIT, 5, 0),          # the x32 ABI's numbers -> ENOSYS
        _insn(_JEQ, clone3, 4, 0),            # -> ENOSYS
        _insn(_JEQ, unshare, 1, 0),           # -> check flags
        _insn(_JEQ, clone, 0, 4),             # not clone either -> allow
        _insn(_LD_ABS, _ARG0),                # flags, the first argument of both (low 32 bits)
        _insn(_JSET, CLONE_NEWUSER, 1, 2),    # -> EPERM : allow
        _insn(_RET, _RET_ERRNO | _ENOSYS),
        _insn(_RET, _RET_ERRNO | _EPERM),
        _insn(_RET, _RET_ALLOW),
    ]
    return b"".join(program)


def filter_fd(program: bytes) -> int:
    """A descriptor bwrap reads the filter from: a memory file, rewound."""
    fd = os.memfd_create("rubric-no-userns", 0)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
