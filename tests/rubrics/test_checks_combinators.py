from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import get_check, run_check, validate_config

TRAJECTORY = make_trajectory(final_answer="EXP-221 and EXP-307 lack sign-off. Total: 48.2L")
HAS_221 = {"contains": {"text": "EXP-221"}}
HAS_999 = {"contains": {"text": "EXP-999"}}
TOTAL = {"number": {"label": "total", "expected": "48.2L"}}


def run(key, config):
    return run_check(key, config, TRAJECTORY)


def test_all_of():
    outcome = run("all_of", [HAS_221, TOTAL])
    assert outcome.met
    assert outcome.evidence == (
        "all 2 met: contains: found 'EXP-221' in final_answer; "
        "number: found 48.2L (= 4,820,000) after 'total'; expected 4,820,000"
    )
    outcome = run("all_of", [HAS_221, HAS_999, TOTAL])
    assert not outcome.met and outcome.evidence.startswith("unmet contains: 'EXP-999' not found")


def test_any_of():
    assert run("any_of", [HAS_999, TOTAL]).met
    outcome = run("any_of", [HAS_999, {"regex": {"pattern": "EXP-4"}}])
    assert not outcome.met and outcome.evidence.startswith("none of 2 met: contains: 'EXP-999' not found")


def test_not_and_nesting():
    assert run("not", HAS_999).met
    outcome = run("not", HAS_221)
    assert not outcome.met and outcome.evidence == "negated contains: found 'EXP-221' in final_answer"
    assert run("all_of", [{"not": HAS_999}, {"any_of": [HAS_999, HAS_221]}]).met


def test_children_are_validated_when_the_combinator_is():
    with pytest.raises(ValidationError, match=r"\[1\]\.contains\.text: Field required; \[1\]\.contains\.txt: Extra inputs are not permitted"):
        validate_config("all_of", [HAS_221, {"contains": {"txt": "x"}}])
    with pytest.raises(ValidationError, match=r"\[0\]: unknown check key 'contain'"):
        validate_config("any_of", [{"contain": {"text": "x"}}])
    with pytest.raises(ValidationError, match="exactly one check key"):
        validate_config("not", {"contains": {"text": "a"}, "regex": {"pattern": "b"}})
    with pytest.raises(ValidationError, match="at least one check"):
        validate_config("all_of", [])
    with pytest.raises(ValidationError, match="judge is compiled to a judge request"):
        validate_config("all_of", [{"judge": "is polite"}])


def test_lint_reaches_children_and_names_them():
    spec = get_check("any_of")
    config = validate_config("any_of", [HAS_221, {"not": {"regex": {"pattern": "("}}}])
    ((severity, code, message),) = spec.lint(config)
    assert (severity, code) == ("error", "invalid-regex")
    assert message.startswith("any_of[1].not: not.regex: pattern: invalid regex")
