"""The sandbox grade.sh runs in: bwrap, docker or a bare process, with limits, a workspace and a trampoline."""
