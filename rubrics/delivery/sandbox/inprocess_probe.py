"""An in-process forge planted in a copy of the start: `rubric tasks validate` grades it to find a grade.sh that
trusts what the tested code's own process writes (its JUnit report, its exit status).

The forge is the shadow probe's (a JUnit file naming every hidden test passed, "N passed" printed, `os._exit(0)`),
appended to every module of the start that is not a test, so that it runs at import, when the hidden tests
import the package under test: during collection, before any test. Under the harness's result channel that run
is unfinished and every test missing; a grader that clears the environment (`env -i`), or reads its verdict from
the report or the exit status alone, hands it a full reward.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

from rubrics.delivery.sandbox.shadow_probe import FORGE

_TEST_FOLDERS = {"tests", "test", "testing"}
# A function, so that the forge's names do not clobber the module's; at the end, so that a module's
# `from __future__` imports and docstring stay first.
PLANTED = "\n\ndef _rubric_probe_forge():\n" + textwrap.indent(FORGE, "    ") + "\n\n_rubric_probe_forge()\n"


def _is_test(relative: Path) -> bool:
    name = relative.name
    return (name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")
            or bool(_TEST_FOLDERS & set(relative.parts[:-1])))


def plant_in_process_forge(workspace: Path) -> None:
    for folder, dirs, files in os.walk(workspace):   # never follows links: the start's links are not its files
        dirs[:] = [d for d in dirs if d not in (".git", "__pycache__")]
        for name in files:
            path = Path(folder) / name
            if not name.endswith(".py") or path.is_symlink() or _is_test(path.relative_to(workspace)):
                continue
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(PLANTED)
