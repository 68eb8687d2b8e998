"""The guide's custom-check plugin (docs/guide/rubric-format.md, "Custom checks"), as written: its module, its
entry point and its rubric lines work.

The package is put on sys.path with a dist-info folder holding the entry point from the guide's
pyproject.toml, which is how an installed distribution is found by importlib.metadata (tests/test_install_light.py
installs the same files with pip into a fresh virtual environment).
"""
from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from rubrics.checks import registry

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "guide" / "rubric-format.md"   # where the rubric format, custom checks included, is documented


def custom_check_files() -> dict[str, str]:
    """module, pyproject and rubric lines: the code blocks of the guide's "Custom checks" section."""
    page = PAGE.read_text(encoding="utf-8")
    section = page.split("\n## Custom checks\n", 1)[1].split("\n## ", 1)[0]
    blocks = {info: body for info, body in re.findall(r"^```(\w+)\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)}
    assert set(blocks) == {"python", "toml", "yaml"}, "the section shows the module, its pyproject.toml and a rubric"
    return blocks


def write_plugin(root: Path) -> tuple[str, dict]:
    """Writes the guide's package under root as an installed distribution; returns (module name, pyproject)."""
    blocks = custom_check_files()
    first_line = blocks["python"].splitlines()[0]
    module_path = re.fullmatch(r"# (\S+\.py)", first_line).group(1)   # the module names its own path
    (root / module_path).parent.mkdir(parents=True, exist_ok=True)
    (root / module_path).write_text(blocks["python"])
    pyproject = tomllib.loads(blocks["toml"])
    project = pyproject["project"]
    dist_info = root / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = [f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
             for group, points in project["entry-points"].items()]
    (dist_info / "entry_points.txt").write_text("\n".join(lines))
    return module_path.split("/")[0], pyproject


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    module, pyproject = write_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    registry.reset_plugins()
    yield pyproject
    registry.reset_plugins()


def rubric_with(criteria: list) -> dict:
    return {"version": 1, "id": "custom", "task": "Write a short summary.",
            "criteria": [{"id": "any-answer", "points": 1, "regex": {"pattern": "."}}, *criteria]}


def test_the_entry_point_registers_the_key(plugin):
    assert list(plugin["project"]["entry-points"]) == [registry.ENTRY_POINT_GROUP]
    [key] = plugin["project"]["entry-points"][registry.ENTRY_POINT_GROUP]
    assert key in registry.check_keys() and registry.get_check(key).key == key


def test_the_guides_rubric_lines_grade_with_the_plugin(plugin):
    import rubrics

    criteria = yaml.safe_load(custom_check_files()["yaml"])["criteria"]
    rubric = rubrics.load_rubric(rubric_with(criteria))
    short = rubrics.score({"id": "short", "messages": [], "final_answer": "Total travel spend was 48.2L, up 16% on Q2."}, rubric,
                          judge=rubrics.NoJudge())
    terse = rubrics.score({"id": "terse", "messages": [], "final_answer": "48.2L"}, rubric, judge=rubrics.NoJudge())
    long = rubrics.score({"id": "long", "messages": [], "final_answer": "word " * 400}, rubric,
                         judge=rubrics.NoJudge())
    status = {r.trajectory_id: {i.id: i.status for i in r.items} for r in (short, terse, long)}
    assert status["short"] == {"any-answer": "met", "concise": "met", "not-terse": "met"}
    assert status["terse"] == {"any-answer": "met", "concise": "met", "not-terse": "unmet"}
    assert status["long"] == {"any-answer": "met", "concise": "unmet", "not-terse": "met"}
    assert short.score == 1.0 and short.complete
    evidence = {i.id: i.evidence for i in long.items}["concise"]
    assert evidence == "400 words in the final answer (min 0, max 300)"


def test_the_plugin_lint_and_config_errors_reach_rubric_lint(plugin, tmp_path):
    from rubrics.rubric.lint import lint_file

    bad = tmp_path / "rubric.yaml"
    bad.write_text(yaml.safe_dump(rubric_with([{"id": "range", "points": 1, "word_count": {"min": 9, "max": 3}},
                                               {"id": "typo", "points": 1, "word_count": {"maxx": 3}}]),
                                  sort_keys=False))
    problems = {(p.code, p.severity) for p in lint_file(bad)}
    assert ("bad-range", "error") in problems
    assert any(code in {"unknown-key", "schema"} and severity == "error" for code, severity in problems)


def test_rubric_lint_prints_the_plugin_problem_at_its_field(plugin, tmp_path, capsys):
    from rubrics.cli.main import main

    bad = tmp_path / "rubric.yaml"
    bad.write_text(yaml.safe_dump(rubric_with([{"id": "range", "points": 1, "word_count": {"min": 9, "max": 3}}]),
                                  sort_keys=False))
    assert main(["lint", str(bad)]) == 1
    shown = capsys.readouterr().out.strip().replace(str(bad), "rubric.yaml")
    assert f"`{shown}`" in PAGE.read_text(encoding="utf-8")
