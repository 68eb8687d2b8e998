"""How a task's hidden tests are split into fail-to-pass (prove the fix) and pass-to-pass (prove nothing broke).

Convention: a file belongs to a kind when its name, or a folder between tests/ and it, contains
`fail_to_pass` or `pass_to_pass` (tests/test_fail_to_pass.py, tests/pass_to_pass/test_api.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FAIL_TO_PASS = "fail_to_pass"
PASS_TO_PASS = "pass_to_pass"

# Files that look like tests in the common runners; anything else under tests/ (fixtures, data,
# conftest.py) may stay unclassified.
_TEST_NAME = re.compile(r"^(test_.*\.py|.*_test\.py|.*\.(test|spec)\.[jt]sx?|.*_test\.go|.*_spec\.rb)$")
_PY_TEST_DEF = re.compile(r"^\s*(async\s+def|def)\s+test|^\s*class\s+Test", re.MULTILINE)


@dataclass
class HiddenTests:
    fail_to_pass: list[Path] = field(default_factory=list)
    pass_to_pass: list[Path] = field(default_factory=list)
    unclassified: list[Path] = field(default_factory=list)    # test-like files in neither kind


def classify_tests(tests_dir: Path) -> HiddenTests:
    layout = HiddenTests()
    for path in sorted(p for p in tests_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        parts = path.relative_to(tests_dir).parts
        kinds = {k for k in (FAIL_TO_PASS, PASS_TO_PASS) if any(k in part for part in parts)}
        # A name carrying both markers is ambiguous and counts as unclassified.
        if kinds == {FAIL_TO_PASS}:
            layout.fail_to_pass.append(path)
        elif kinds == {PASS_TO_PASS}:
            layout.pass_to_pass.append(path)
        elif _TEST_NAME.match(path.name) or kinds:
            layout.unclassified.append(path)
    return layout


def defines_no_test(path: Path) -> bool:
    """True for a Python file with no test function or class: it would pass without testing anything."""
    if path.suffix != ".py" or path.name in ("conftest.py", "__init__.py"):
        return False
    try:
        return _PY_TEST_DEF.search(path.read_text(encoding="utf-8", errors="replace")) is None
    except OSError:
        return True
