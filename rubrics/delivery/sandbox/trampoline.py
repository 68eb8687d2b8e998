"""The first program inside the sandbox: set the limits, drop to the sandbox user, run grade.sh, count leftovers.

Run as `python -I -S -c SOURCE uid nproc as_bytes fsize_bytes status_fd cmd...` so that it needs nothing
but the interpreter. When `uid` is -1 the caller is already unprivileged and keeps its uid. The
trampoline itself stays as it came in (root in the privileged mode), so that the attempt's processes,
running as another uid, can neither kill it nor write to its status descriptor.
"""
from __future__ import annotations

SOURCE = r'''
import os, resource, sys
uid, nproc, as_bytes, fsize, status_fd = (int(a) for a in sys.argv[1:6])
cmd = sys.argv[6:]
pid = os.fork()
if pid == 0:
    try:
        os.close(status_fd)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if uid >= 0:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        os.execvp(cmd[0], cmd)
    except BaseException as exc:
        os.write(2, ("sandbox: cannot start %r: %s\n" % (cmd[0], exc)).encode())
    os._exit(127)
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
left = 0
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) in (1, os.getpid()):
        continue
    try:
        with open("/proc/%s/stat" % name) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        continue
    if state not in ("Z", "X"):
        left += 1
os.write(status_fd, ("%d %d\n" % (code, left)).encode())
sys.exit(code if code >= 0 else 128 - code)
'''
