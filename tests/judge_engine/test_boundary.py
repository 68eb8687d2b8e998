"""The boundary between the two packages: rubrics uses judge_engine only through `judge_engine` itself (its lazy
exports) and `judge_engine.server`; judge_engine imports nothing of rubrics.

Every .py is parsed (ast): `import`, `from ... import` (inside functions too), `importlib.import_module(...)` and
`__import__(...)` with a literal or f-string name, and string constants that are a bare module path (the tables of
lazy imports).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED_ENGINE_MODULES = frozenset({"judge_engine", "judge_engine.server"})
MODULE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
IMPORT_FUNCTIONS = frozenset({"import_module", "__import__"})


def engine_modules() -> frozenset[str]:
    """Every module of judge_engine by its dotted name (`from judge_engine import loading` imports one)."""
    names = set()
    for path in (ROOT / "judge_engine").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(names)


def imported_names(tree: ast.AST, modules: frozenset[str] = frozenset()):
    """(line, module name) for each module the tree imports or names for a lazy import; `from M import N` counts as
    importing M.N too when that is one of ``modules``. A name ending in "*" is an f-string's literal prefix (the rest
    is computed)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module:
                continue   # relative: inside its own package
            yield node.lineno, node.module
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args and called_name(node.func) in IMPORT_FUNCTIONS:
            first = node.args[0]
            if isinstance(first, ast.JoinedStr):
                prefix = ""
                for part in first.values:
                    if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                        break
                    prefix += part.value
                yield node.lineno, prefix + "*"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_PATH.fullmatch(node.value):
            yield node.lineno, node.value   # a literal import_module argument, or an entry of a lazy table


def called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def is_engine_internal(name: str) -> bool:
    if name.endswith("*"):
        return name.startswith("judge_engine.")   # a computed judge_engine.<something>: cannot be checked
    return name.startswith("judge_engine.") and name not in ALLOWED_ENGINE_MODULES


def is_rubrics(name: str) -> bool:
    name = name.rstrip("*")
    return name == "rubrics" or name.startswith("rubrics.")


def violations(folder: str, bad, modules: frozenset[str] = frozenset()):
    found = set()
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in imported_names(tree, modules):
            if bad(name):
                found.add((str(path.relative_to(ROOT)), line, name))
    return [f"{path}:{line}: {name}" for path, line, name in sorted(found)]


def rubrics_violations() -> list[str]:
    return violations("rubrics", is_engine_internal, engine_modules())


def test_rubrics_imports_judge_engine_only_through_its_front_doors():
    found = rubrics_violations()
    assert not found, ("rubrics may import only judge_engine and judge_engine.server (export what it needs from "
                       "their __init__.py):\n" + "\n".join(found))


def test_judge_engine_knows_nothing_of_rubrics():
    found = violations("judge_engine", is_rubrics)
    assert not found, "judge_engine must not import rubrics:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import judge_engine.config",
    "import judge_engine.server.app",
    "from judge_engine.engine.llm_engine import LLMEngine",
    "from judge_engine.server.connections import uvicorn_config",
    "from judge_engine import loading",
    "from judge_engine.server import connections",
    "def f():\n    from judge_engine.loading import weights",
    "import importlib\nimportlib.import_module('judge_engine.config')",
    "from importlib import import_module\nimport_module('judge_engine.server.app')",
    "__import__('judge_engine.llm')",
    "import importlib\nname = 'x'\nimportlib.import_module(f'judge_engine.{name}')",
    "_EXPORTS = {'LLM': 'judge_engine.llm'}",
])
def test_the_check_finds_each_kind_of_import(source):
    modules = engine_modules()
    assert {"judge_engine.loading", "judge_engine.server.connections"} <= modules
    names = [name for _, name in imported_names(ast.parse(source), modules)]
    assert any(is_engine_internal(name) for name in names), names


@pytest.mark.parametrize("source", [
    "import judge_engine",
    "import judge_engine.server",
    "from judge_engine import LLM, catalog_models",
    "from judge_engine import server",
    "from judge_engine.server import create_app",
    "import importlib\nimportlib.import_module('judge_engine')",
    "'''Served by judge_engine.server.connections, see there.'''",
])
def test_the_check_lets_the_front_doors_through(source):
    names = [name for _, name in imported_names(ast.parse(source), engine_modules())]
    assert not any(is_engine_internal(name) for name in names), names


def test_the_loader_imports_first_in_a_fresh_interpreter():
    """Python runs a package's __init__.py before its submodules, an arrow that an import graph of modules does not
    show: judge_engine.models' __init__ importing the loader broke `rubric serve`, which imports the loader first."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import judge_engine.loading.loader"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
