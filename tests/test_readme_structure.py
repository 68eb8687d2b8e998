"""The README is the front page: short, in the order a new user needs it, linking out; the reference is in
docs/guide/, one topic a page; how the project is built is in docs/.

These tests hold the pages to that: the two quickstart commands at the top, the front page's sections in order and
its length, every guide page present with its sections and linked from the front page and the guide index, the
internals in docs/ (and nowhere lost), every relative link and anchor resolving, the documented formats matching
the code (the trajectory example, the lint codes, the extras, the subcommands), the front page's judge figures
the same as the guide's, and no citation of a document this repository does not have.
"""
from __future__ import annotations

import argparse
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
GUIDE = DOCS / "guide"
sys.path.insert(0, str(REPO / "tests" / "rubrics"))   # trajectory_factory

QUICKSTART_COMMANDS = [
    'pip install "torch==2.13.0" -e ".[engine]" && rubric grade examples/cfo-mis/rubric.yaml '
    "examples/cfo-mis/trajectories/",
    'pip install "torch==2.13.0" -e ".[engine,serve,test]" && python -m pytest',
]
FRONT_SECTIONS = [
    "Quickstart",
    "Install",
    "A rubric",
    "A trajectory",
    "Python API",
    "Command line",
    "How far to trust the judge",
    "Documentation",
    "Development",
]
FRONT_PAGE_MAX_LINES = 250   # a front page that grows past this is turning back into the reference
# Each guide page: its title, then its level-2 sections in order. A section that moves or goes is a decision.
GUIDE_PAGES = {
    "README.md": ("The agent-rubrics guide", []),
    "rubric-format.md": ("The rubric format", [
        "Top level", "Items and scoring", "Check keys", "Selectors (`in` of a check, `evidence` of a judge item)",
        "Judge options", "Custom checks"]),
    "trajectories.md": ("The trajectory format", ["Logs of agent frameworks (adapters)"]),
    "python-api.md": ("Python API", ["The attempts of one task together: `score_group`",
                                     "Many rubrics, one batch; async"]),
    "cli.md": ("Command line", [
        "`rubric grade`, `rubric lint`, `rubric schema`", "The other commands", "Looking at results: `rubric view`",
        "HealthBench: `rubric import healthbench` and `--aggregate healthbench`", "pre-commit"]),
    "judges.md": ("Judges, and how far to trust them", [
        "Judge models by name", "Verdicts: probabilities, not parsed text", "Untrusted text", "Long trajectories",
        "How good is the embedded judge?", "Judging a group of attempts side by side",
        "Expected score and range: how sure a score is",
        "Measuring a judge on your labels: `rubric judge-eval`", "A learned verdict head: `rubric judge-train`",
        "Calibration files: a fitted calibration tied to its judge",
        "Judge panels: several judges, one verdict per item", "The verdict cache: re-grading does no model work",
        "Judge usage and cost", "Determinism: what is guaranteed on which hardware"]),
    "scaling-out.md": ("Scaling out: a serving cluster, or `rubric serve`", [
        "Grading against a serving cluster (vLLM, SGLang, llama.cpp, any OpenAI-compatible server)",
        "Sharing one `rubric serve` between many workers"]),
    "deliveries.md": ("Deliveries: from a folder to a report", []),
    "integrations.md": ("Integrations: trainers, evaluation frameworks, Ray, task runners", [
        "Rewards for RL trainers: an incomplete result is never 0.0", "In TRL (GRPOTrainer)", "In verifiers",
        "In Inspect AI", "Grading millions of trajectories: Ray Data and a serving cluster",
        "reward.json for Harbor and Terminal-Bench"]),
}
DOC_PAGES = ["README.md", "architecture.md", "judge-prompts.md", "engine.md", "engine-design.md", "kernels.md",
             "benchmarks.md", "lint-codes.md", "judge-quality.md", "delivery.md"]
# What a user must find in the section where they would look for it: (guide page, section) -> phrase.
PLACED = {
    ("judges.md", "Determinism: what is guaranteed on which hardware"):
        "bit for bit the same whatever else is in the batch",
    ("scaling-out.md", "Sharing one `rubric serve` between many workers"): "--max-request-bytes",
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


def preamble(markdown: str) -> str:
    """The text above a page's first level-2 heading (a guide page's introduction), code blocks kept whole."""
    lines, in_code = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and line.startswith("## "):
            break
        lines.append(line)
    return "\n".join(lines)


def user_pages() -> list[Path]:
    """The pages a user reads: the front page and the guide."""
    return [README, *(GUIDE / name for name in GUIDE_PAGES)]


def table_rows(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_the_quickstart_is_exactly_the_two_commands_at_the_top():
    readme = text(README)
    assert list(sections(readme))[0] == "Quickstart"
    info, body = fenced_blocks(sections(readme)["Quickstart"])[0]
    assert info == "bash"
    assert body.splitlines() == QUICKSTART_COMMANDS
    from test_quickstart import QUICKSTART   # the command test_quickstart.py runs is the one shown
    assert QUICKSTART_COMMANDS[0].endswith("rubric " + " ".join(QUICKSTART))


def test_the_front_page_has_its_sections_in_order_and_stays_short():
    readme = text(README)
    assert list(sections(readme)) == FRONT_SECTIONS
    assert len(readme.splitlines()) <= FRONT_PAGE_MAX_LINES


def test_every_guide_page_is_there_with_its_sections_and_linked_from_the_front_page_and_the_index():
    assert sorted(p.name for p in GUIDE.glob("*.md")) == sorted(GUIDE_PAGES)
    readme, index = text(README), text(GUIDE / "README.md")
    from_readme = set(re.findall(r"\]\(docs/guide/([\w.-]+\.md)", readme))
    from_index = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    for name, (title, page_sections) in GUIDE_PAGES.items():
        page = text(GUIDE / name)
        assert page.splitlines()[0] == f"# {title}", name
        assert list(sections(page)) == page_sections, name
        assert name in from_readme, f"the front page links docs/guide/{name}"
        if name != "README.md":
            assert name in from_index, f"the guide index links {name}"


def test_engine_kernel_and_benchmark_internals_live_in_docs_not_in_the_user_pages():
    internals = {
        "engine.md": "engine.add_request(request_id, prompt, params, stream=True)",
        "engine-design.md": "as tiles of exactly 32 rows",
        "kernels.md": "TRITON_INTERPRET=1",
        "benchmarks.md": "| one at a time | 64/64 | 302.7 s |",
        "architecture.md": "rubrics/rubric/compiler.py: Rubric ─► Plan",
        "judge-prompts.md": "[task, reference, fenced evidence]",
    }
    for page, phrase in internals.items():
        assert phrase in text(DOCS / page), page
        for user_page in user_pages():
            assert phrase not in text(user_page), (user_page.name, phrase)
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", text(README)))
    assert set(DOC_PAGES) <= linked, "every docs page is linked from the README"


def test_determinism_and_serving_limits_sit_in_their_sections():
    for (page, section), phrase in PLACED.items():
        assert phrase in sections(text(GUIDE / page))[section], (page, section)
    for user_page in user_pages():
        assert "<!--" not in text(user_page), user_page.name


def test_relative_links_and_anchors_resolve():
    pages = [README, *(DOCS / name for name in DOC_PAGES), *(GUIDE / name for name in GUIDE_PAGES)]
    assert sorted(p.name for p in DOCS.glob("*.md")) == sorted(DOC_PAGES)
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", text(page)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.relative_to(REPO)}: {target}"
            if anchor:
                assert anchor in anchors(text(linked)), f"{page.relative_to(REPO)}: {target}"


def test_the_trajectory_example_is_the_tests_example_and_matches_the_schema():
    from trajectory_factory import README_EXAMPLE

    from rubrics.trajectory import load_trajectory

    schema = json.loads(text(REPO / "schemas" / "trajectory.schema.json"))
    guide = preamble(text(GUIDE / "trajectories.md"))
    for where in (sections(text(README))["A trajectory"], guide):   # the front page's copy and the guide's
        blocks = [body for info, body in fenced_blocks(where) if info == "json"]
        assert len(blocks) == 1
        example = json.loads(blocks[0])
        assert example == README_EXAMPLE
    jsonschema.validate(example, schema)
    loaded = load_trajectory(example)
    assert loaded.emails()[0].attachments[0].name == "Q3_MIS.pdf" and loaded.tool_calls()[0].name == "send_email"
    documented = set(re.findall(r"^\| `(\w+)` \|", guide, re.MULTILINE))
    assert documented == set(schema["properties"])


def test_every_lint_code_is_documented_once():
    from rubrics.rubric.lint import LINT_CODES

    documented = re.findall(r"^\| `([\w-]+)` \|", text(DOCS / "lint-codes.md"), re.MULTILINE)
    assert sorted(documented) == sorted(LINT_CODES)


def test_every_extra_is_in_the_readme_install_table():
    extras = tomllib.loads(text(REPO / "pyproject.toml"))["project"]["optional-dependencies"]
    table = sections(text(README))["Install"]
    shown = set()
    for row in re.findall(r'^\| `pip install -e (?:\.|"\.\[([\w,]+)\]")` \|', table, re.MULTILINE):
        shown.update(filter(None, row.split(",")))
    assert shown == set(extras)
    assert [re.match(r"[\w-]+", dep).group() for dep in extras["openai"]] == ["httpx"]   # no torch


def test_the_front_page_command_table_has_one_row_per_subcommand_in_the_parsers_order():
    from rubrics.cli.main import build_parser

    [subcommands] = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    rows = re.findall(r"^\| `rubric ([\w-]+)` \|", sections(text(README))["Command line"], re.MULTILINE)
    assert rows == list(subcommands.choices)


def test_the_front_page_judge_table_is_the_guides_measured_table():
    """Figures are updated in one place and copied to the other; this keeps the copy from going stale."""
    trust = sections(text(README))["How far to trust the judge"]
    front = table_rows(trust)
    guide = table_rows(sections(text(GUIDE / "judges.md"))["How good is the embedded judge?"])
    assert front == guide
    from rubrics.judges.fitted.judge_models import JUDGE_MODELS

    for model in JUDGE_MODELS.values():   # every catalog model is in the table with the method it runs by default
        cells = [[cell.replace("*", "").strip() for cell in row.split("|")] for row in front]
        assert any(row[1].split(" ")[0] == model.catalog_name and row[2] == model.method for row in cells), model
    default_row = next(row for row in front if "(default)" in row)
    held_out = default_row.split("|")[3].strip().strip("*")
    assert f"balanced accuracy {held_out}" in trust, "the paragraph's headline figure is the default's, as measured"



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
