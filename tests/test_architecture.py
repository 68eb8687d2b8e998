"""The import structure holds to docs/architecture.md ("Floors"), at two levels, lazy imports inside functions
included (an import is an arrow wherever it is written):

- modules: no module of `rubrics` or `judge_engine` reaches itself through its imports;
- packages: each unit (a package of rubrics, rubrics/<pkg>/ as a whole; a module directly in rubrics/; judge_engine)
  stands on one of FLOORS and imports only units on floors below its own, so no arrow runs back up (nor sideways to
  a unit on its own floor) and no two packages reach each other; `judge_engine`, on the ground floor, knows nothing
  of `rubrics`.

An import names a module: `from a.b import c` is an arrow to a.b.c where that is a module, else to a.b (its
__init__.py for a package)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("rubrics", "judge_engine")

# The floors of the house, from the top down: the one place the order is written. A unit is named as it is
# imported; "rubrics" is the package's face, rubrics/__init__.py. A new package, or a new module directly in
# rubrics/, gets its floor here: below everything that imports it, above everything it imports.
FLOORS = (
    ("rubrics.cli",),
    ("rubrics.view",),
    ("rubrics.trust", "rubrics.integrations", "rubrics.schema_gen"),
    ("rubrics.grading", "rubrics.delivery", "rubrics.healthbench"),
    ("rubrics.rubric",),
    ("rubrics", "rubrics.result", "rubrics.checks"),
    ("rubrics.judges", "rubrics.trajectory"),
    ("judge_engine", "rubrics.moved_modules", "rubrics.version", "rubrics.wording", "rubrics.cache_dir",
     "rubrics.input_files"),
)


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


def unit_of(module: str) -> str:
    """rubrics.judges.methods.base -> rubrics.judges; rubrics.result -> itself; judge_engine.llm -> judge_engine."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "rubrics" else parts[0]


def floor_numbers(floors=FLOORS) -> dict[str, int]:
    """Each unit's floor, the ground floor being 1."""
    return {unit: len(floors) - index for index, floor in enumerate(floors) for unit in floor}


def arrows_not_down(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Every import from one unit into another that does not run down to a lower floor, module by module."""
    found = []
    for source in sorted(graph):
        for target in sorted(graph[source]):
            a, b = unit_of(source), unit_of(target)
            if a != b and floors[b] >= floors[a]:
                way = "back up" if floors[b] > floors[a] else "along its floor"
                found.append(f"{source} -> {target}: {a} (floor {floors[a]}) imports {b} (floor {floors[b]}), {way}")
    return found


def test_every_unit_stands_on_one_floor():
    listed = [unit for floor in FLOORS for unit in floor]
    assert len(listed) == len(set(listed)), f"named on two floors: {sorted({u for u in listed if listed.count(u) > 1})}"
    units = {unit_of(name) for name in module_files()}
    assert not units - set(listed), f"give these a floor in FLOORS: {sorted(units - set(listed))}"
    assert not set(listed) - units, f"FLOORS names what is no longer there: {sorted(set(listed) - units)}"


def test_no_package_imports_one_on_its_own_floor_or_above():
    found = arrows_not_down(import_graph(), floor_numbers())
    assert not found, "imports that do not run down the FLOORS of tests/test_architecture.py:\n" + "\n".join(found)


def test_the_floor_check_finds_an_arrow_back_up_and_one_along_a_floor():
    floors = floor_numbers((("rubrics.top",), ("rubrics.low", "rubrics.side")))
    graph = {"rubrics.top.a": {"rubrics.low.b", "rubrics.top.c"}, "rubrics.top.c": set(),
             "rubrics.low.b": {"rubrics.top.c", "rubrics.side"}, "rubrics.side": set()}
    assert arrows_not_down(graph, floors) == [
        "rubrics.low.b -> rubrics.side: rubrics.low (floor 1) imports rubrics.side (floor 1), along its floor",
        "rubrics.low.b -> rubrics.top.c: rubrics.low (floor 1) imports rubrics.top (floor 2), back up"]
