"""The tests a task's hidden tests/ define, found without running them (Python: test functions and
Test classes' test methods), so that a test missing from the grader's report counts as not passed."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rubrics.delivery.tasks.hidden_tests import classify_tests

TestKind = Literal["fail_to_pass", "pass_to_pass"]


@dataclass(frozen=True)
class ExpectedTest:
    file: str            # path under tests/, '/'-separated
    qualname: str        # test_x, or TestClass.test_y
    kind: TestKind

    @property
    def id(self) -> str:
        return f"tests/{self.file}::{self.qualname.replace('.', '::')}"

    @property
    def dotted(self) -> str:
        return self.file.removesuffix(".py").replace("/", ".") + "." + self.qualname


def expected_tests(tests_dir: Path) -> list[ExpectedTest]:
    layout = classify_tests(tests_dir)
    found: list[ExpectedTest] = []
    for kind, paths in (("fail_to_pass", layout.fail_to_pass), ("pass_to_pass", layout.pass_to_pass)):
        for path in paths:
            if path.suffix != ".py":
                continue
            rel = path.relative_to(tests_dir).as_posix()
            found += [ExpectedTest(rel, name, kind) for name in _test_names(path)]
    return sorted(found, key=lambda t: (t.kind != "fail_to_pass", t.file, t.qualname))


def _test_names(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names += [f"{node.name}.{m.name}" for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test")]
    return names
