from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import get_check, run_check, validate_config

FILES = {"reports/mis.md": "# Q3 MIS\nTotal travel spend: 48.2L", "reports/raw.csv": "id,amount", "README.md": "hi"}


def run(**config):
    return run_check("file", config, make_trajectory(files=FILES))


def test_exists_by_exact_path_and_by_glob():
    assert run(path="reports/mis.md").met
    outcome = run(path="reports/*.md")
    assert outcome.met and outcome.evidence == "reports/mis.md matches 'reports/*.md'"
    assert run(path="./README.md").met
    assert run(path="**/*.csv").met


def test_missing_file_lists_what_exists():
    outcome = run(path="reports/*.pdf")
    assert not outcome.met
    assert outcome.evidence == "no file matches 'reports/*.pdf' in state.files (files: reports/mis.md, reports/raw.csv, README.md)"
    outcome = run_check("file", {"path": "a.md"}, make_trajectory())
    assert outcome.evidence.endswith("(state.files is empty)")


def test_contains_is_case_insensitive():
    assert run(path="reports/*", contains="TOTAL TRAVEL").met
    outcome = run(path="reports/*", contains="EXP-221")
    assert not outcome.met and outcome.evidence == "reports/mis.md, reports/raw.csv matches 'reports/*' but lacks 'EXP-221'"


def test_exists_false():
    assert run(path="*.pdf", exists=False).met
    outcome = run(path="reports/*.md", exists=False)
    assert not outcome.met and outcome.evidence.endswith("expected none")
    assert run(path="reports/*.md", exists=False, contains="password").met  # no matching file holds the text


def test_config_and_lint():
    with pytest.raises(ValidationError, match="Field required"):
        validate_config("file", {"exists": True})
    spec = get_check("file")
    assert [c for _, c, _ in spec.lint(spec.config_model.model_validate({"path": "reports/[ab.md"}))] == ["invalid-glob"]
    assert spec.lint(spec.config_model.model_validate({"path": "reports/[ab].md"})) == []
