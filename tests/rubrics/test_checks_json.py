from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import CheckError, get_check, run_check, validate_config
from rubrics.checks.json_path import parse_path

DOCUMENT = '{"summary": {"total": 4820000, "flags": ["EXP-221", "EXP-307"], "ok": true, "x.y": null}}'


def run(answer=DOCUMENT, **config):
    return run_check("json", config, make_trajectory(final_answer=answer))


def test_paths():
    assert parse_path("summary.flags[1]") == ["summary", "flags", 1]
    assert parse_path('$.summary["x.y"]') == ["summary", "x.y"]
    assert parse_path("") == [] and parse_path("[-1]") == [-1]
    for bad in ("a..b", "a[x]", "a[0]b", 'a["x]'):
        with pytest.raises(ValueError):
            parse_path(bad)


def test_equals_one_of_matches():
    outcome = run(path="summary.total", equals=4820000)
    assert outcome.met and outcome.evidence == "summary.total is 4820000; expected 4820000"
    assert run(path="summary.flags[-1]", one_of=["EXP-307", "EXP-308"]).met
    assert run(path="summary.flags", matches=r"EXP-221.*EXP-307").met  # non-strings are matched as JSON text
    assert run(path='summary["x.y"]', equals=None).met
    assert not run(path="summary.ok", equals=1).met  # true is not 1
    assert run(path="summary.ok", equals=True).met
    outcome = run(path="summary.total", one_of=[1, 2])
    assert not outcome.met and outcome.evidence == "summary.total is 4820000; expected one of [1, 2]"


def test_fenced_json_block_is_accepted():
    answer = "Here is the summary:\n\n```json\n" + DOCUMENT + "\n```\nThanks."
    assert run(answer, path="summary.flags[0]", equals="EXP-221").met


def test_missing_path_and_unparseable_text_are_unmet_with_evidence():
    outcome = run(path="summary.flags[5]", equals="x")
    assert not outcome.met and outcome.evidence == "summary.flags[5] not found in final_answer: summary.flags has 2 items, no [5]"
    outcome = run(path="summary.owner.name", equals="x")
    assert outcome.evidence.endswith("summary has no key 'owner'")
    outcome = run("Total: 48.2L", path="total", equals=1)
    assert not outcome.met and outcome.evidence.startswith("final_answer is not JSON (Expecting value: line 1 column 1")
    outcome = run_check("json", {"path": "a", "equals": 1}, make_trajectory())
    assert not outcome.met and "no final answer" in outcome.evidence


def test_reads_files_and_state():
    trajectory = make_trajectory(files={"out/summary.json": DOCUMENT}, ledger={"rows": [{"id": 1}]})
    assert run_check("json", {"in": "files.out/*.json", "path": "summary.total", "equals": 4820000}, trajectory).met
    assert run_check("json", {"in": "state.ledger", "path": "rows[0].id", "equals": 1}, trajectory).met


def test_config_validation_and_lint():
    with pytest.raises(ValidationError, match="exactly one of equals, one_of, matches"):
        validate_config("json", {"path": "a"})
    with pytest.raises(ValidationError, match="exactly one of equals, one_of, matches"):
        validate_config("json", {"path": "a", "equals": 1, "matches": "1"})
    spec = get_check("json")
    config = spec.config_model.model_validate({"path": "a..b", "matches": "(", "in": "final"})
    assert sorted(c for _, c, _ in spec.lint(config)) == ["bad-path", "invalid-regex", "unknown-selector"]
    with pytest.raises(CheckError, match="path: cannot read path 'a..b'"):
        run(path="a..b", equals=1)
