"""The README is for users, in the order they need it; how the project is built lives in docs/.

These tests hold the README to that: the two quickstart commands at the top, the user sections in order, the
internals in docs/ (and nowhere lost), every relative link and anchor resolving, the documented formats matching
the code (the trajectory example, the lint codes, the extras), and no citation of a document this repository
does not have.
"""
from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
sys.path.insert(0, str(REPO / "tests" / "rubrics"))   # trajectory_factory

QUICKSTART_COMMANDS = [
    'pip install "torch==2.13.0" -e ".[engine]" && rubric grade examples/cfo-mis/rubric.yaml '
    "examples/cfo-mis/trajectories/",
    'pip install "torch==2.13.0" -e ".[engine,serve,test]" && python -m pytest',
]
USER_SECTIONS = [
    "Quickstart",
    "A rubric",
    "The trajectory format",
    "Python API",
    "Command line",
    "Judges, and how far to trust them",
    "Scaling out: a serving cluster, or `rubric serve`",
    "Deliveries: from a folder to a report",
    "Development",
]
DOC_PAGES = ["README.md", "architecture.md", "judge-prompts.md", "engine.md", "engine-design.md", "kernels.md",
             "benchmarks.md", "lint-codes.md", "judge-quality.md", "delivery.md"]
# What a user must find in the section where they would look for it.
PLACED = {
    "### Determinism: what is guaranteed on which hardware": "Judges, and how far to trust them",
    "--max-request-bytes": "Scaling out: a serving cluster, or `rubric serve`",
}


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def fenced_blocks(markdown: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block."""
    return [(m.group(1).strip(), m.group(2)) for m in re.finditer(r"^```([^\n`]*)\n(.*?)^```\s*$", markdown,
                                                                   re.MULTILINE | re.DOTALL)]


def sections(markdown: str) -> dict[str, str]:
    """Level-2 heading -> its text (up to the next level-2 heading), headings inside code blocks ignored."""
    found: dict[str, list[str]] = {}
    current, in_code = None, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("## "):
            current = line[3:].strip()
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return {name: "\n".join(lines) for name, lines in found.items()}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    in_code, found = False, set()
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            found.add(slug(line.lstrip("#")))
    return found


def test_the_quickstart_is_exactly_the_two_commands_at_the_top():
    readme = text(README)
    assert list(sections(readme))[0] == "Quickstart"
    info, body = fenced_blocks(sections(readme)["Quickstart"])[0]
    assert info == "bash"
    assert body.splitlines() == QUICKSTART_COMMANDS
    from test_quickstart import QUICKSTART   # the command test_quickstart.py runs is the one shown
    assert QUICKSTART_COMMANDS[0].endswith("rubric " + " ".join(QUICKSTART))


def test_user_sections_come_in_the_order_a_user_needs_them():
    assert list(sections(text(README))) == USER_SECTIONS


def test_engine_kernel_and_benchmark_internals_live_in_docs_not_in_the_readme():
    readme = text(README)
    internals = {
        "engine.md": "engine.add_request(request_id, prompt, params, stream=True)",
        "engine-design.md": "as tiles of exactly 32 rows",
        "kernels.md": "TRITON_INTERPRET=1",
        "benchmarks.md": "| one at a time | 64/64 | 302.7 s |",
        "architecture.md": "rubrics/compiler.py: Rubric ─► Plan",
        "judge-prompts.md": "[task, reference, fenced evidence]",
    }
    for page, phrase in internals.items():
        assert phrase in text(DOCS / page), page
        assert phrase not in readme, phrase
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", readme))
    assert set(DOC_PAGES) <= linked, "every docs page is linked from the README"


def test_determinism_and_serving_limits_sit_in_their_sections():
    by_section = sections(text(README))
    for phrase, section in PLACED.items():
        assert phrase in by_section[section]
    assert "<!--" not in text(README)


def test_relative_links_and_anchors_resolve():
    pages = [README, *(DOCS / name for name in DOC_PAGES)]
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(DOC_PAGES)
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", text(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor:
                assert anchor in anchors(text(linked)), f"{page.name}: {target}"


def test_the_trajectory_example_is_the_tests_example_and_matches_the_schema():
    from trajectory_factory import README_EXAMPLE

    from rubrics.trajectory import load_trajectory

    blocks = [body for info, body in fenced_blocks(sections(text(README))["The trajectory format"]) if info == "json"]
    assert len(blocks) == 1
    example = json.loads(blocks[0])
    assert example == README_EXAMPLE
    jsonschema.validate(example, json.loads(text(REPO / "schemas" / "trajectory.schema.json")))
    loaded = load_trajectory(example)
    assert loaded.emails()[0].attachments[0].name == "Q3_MIS.pdf" and loaded.tool_calls()[0].name == "send_email"
    schema_fields = json.loads(text(REPO / "schemas" / "trajectory.schema.json"))["properties"]
    documented = set(re.findall(r"^\| `(\w+)` \|", sections(text(README))["The trajectory format"], re.MULTILINE))
    assert documented == set(schema_fields)


def test_every_lint_code_is_documented_once():
    from rubrics.lint import LINT_CODES

    documented = re.findall(r"^\| `([\w-]+)` \|", text(DOCS / "lint-codes.md"), re.MULTILINE)
    assert sorted(documented) == sorted(LINT_CODES)


def test_every_extra_is_in_the_readme_install_table():
    extras = tomllib.loads(text(REPO / "pyproject.toml"))["project"]["optional-dependencies"]
    table = sections(text(README))["Quickstart"]
    shown = set()
    for row in re.findall(r'^\| `pip install -e (?:\.|"\.\[([\w,]+)\]")` \|', table, re.MULTILINE):
        shown.update(filter(None, row.split(",")))
    assert shown == set(extras)
    assert [re.match(r"[\w-]+", dep).group() for dep in extras["openai"]] == ["httpx"]   # no torch


CITATION = re.compile(r"\bS[P]EC\b")   # the name of a document this repository does not have


@pytest.mark.parametrize("root", ["README.md", "docs", "rubrics", "judge_engine", "tests", "benchmarks", "examples"])
def test_nothing_cites_a_document_outside_the_repository(root):
    base = REPO / root
    files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    citing = []
    for path in files:
        relative = path.relative_to(REPO).as_posix()
        if path.suffix not in {".py", ".md", ".yaml", ".yml", ".json", ".jsonl", ".txt"}:
            continue
        if CITATION.search(path.read_text(encoding="utf-8", errors="replace")):
            citing.append(relative)
    assert citing == []
