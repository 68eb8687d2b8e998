"""The import structure holds to docs/architecture.md: no module of `rubrics` or `judge_engine` reaches itself through
its imports (lazy imports inside functions count: a circle is a circle whenever it closes), and `judge_engine`
knows nothing of `rubrics`.

An import names a module: `from a.b import c` is an arrow to a.b.c where that is a module, else to a.b (its
__init__.py for a package)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("rubrics", "judge_engine")


def module_files() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def imported(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """The project modules this file imports, anywhere in it."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in modules else node.module)
    return {name for name in names if name in modules}


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imported(ast.parse(path.read_text(encoding="utf-8")), modules) - {name}
            for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_reaches_itself_through_its_imports():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(
        " <-> ".join(component) + "\n    " + "; ".join(f"{a} -> {sorted(graph[a] & set(component))}"
                                                     for a in component) for component in found)


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_engine_knows_nothing_of_rubrics():
    graph = import_graph()
    reaching = {name: sorted(t for t in targets if t.split(".")[0] == "rubrics")
                for name, targets in graph.items() if name.split(".")[0] == "judge_engine"}
    assert not {name: targets for name, targets in reaching.items() if targets}
