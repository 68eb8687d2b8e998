from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import CheckError, get_check, run_check, validate_config

ANSWER = "Flagged EXP-221 and EXP-307: approved without sign-off.\nQ2 was 41.5L."


def contains(answer=ANSWER, **config):
    return run_check("contains", config, make_trajectory(final_answer=answer))


def test_contains_is_case_insensitive_by_default():
    outcome = contains(text="exp-221")
    assert outcome.met and outcome.evidence == "found 'exp-221' in final_answer"
    assert not contains(text="exp-221", case_sensitive=True).met
    assert contains(text="EXP-221", case_sensitive=True).met


def test_contains_all_by_default_and_names_what_is_missing():
    outcome = contains(text=["EXP-221", "EXP-999", "EXP-307"])
    assert not outcome.met
    assert outcome.evidence == f"'EXP-999' not found in final_answer ({len(ANSWER)} chars) (found 'EXP-221', 'EXP-307')"
    assert contains(text=["EXP-221", "EXP-307"]).met


def test_contains_any():
    assert contains(text=["EXP-999", "exp-307"], all=False).met
    outcome = contains(text=["EXP-998", "EXP-999"], all=False)
    assert not outcome.met and outcome.evidence.startswith("none of 'EXP-998', 'EXP-999' found in final_answer")


def test_contains_on_missing_selection_says_what_is_missing():
    outcome = run_check("contains", {"text": "x"}, make_trajectory())
    assert not outcome.met and "no final answer" in outcome.evidence
    outcome = run_check("contains", {"in": "state.notes", "text": "x"}, make_trajectory(final_answer="x"))
    assert not outcome.met and "state.notes not found" in outcome.evidence


def test_contains_reads_other_selectors():
    trajectory = make_trajectory(
        final_answer="done",
        messages=[{"role": "assistant", "content": "EXP-221 lacks sign-off"}],
        files={"mis.md": "EXP-307"},
    )
    assert run_check("contains", {"in": "assistant", "text": "sign-off"}, trajectory).met
    assert run_check("contains", {"in": "files", "text": "EXP-307"}, trajectory).met
    assert not run_check("contains", {"text": "EXP-307"}, trajectory).met


def test_contains_config():
    with pytest.raises(ValidationError, match="at least one text"):
        validate_config("contains", {"text": []})
    with pytest.raises(ValidationError, match="Extra inputs"):
        validate_config("contains", {"text": "a", "ignore_case": True})
    spec = get_check("contains")
    assert [c for _, c, _ in spec.lint(spec.config_model.model_validate({"text": ""}))] == ["empty-text"]
    bad = spec.config_model.model_validate({"in": "answers", "text": "x"})
    assert [c for _, c, _ in spec.lint(bad)] == ["unknown-selector"]


def regex(answer=ANSWER, **config):
    return run_check("regex", config, make_trajectory(final_answer=answer))


def test_regex_searches_and_reports_the_match():
    outcome = regex(pattern=r"Q2 was [\d.]+L")
    assert outcome.met and outcome.evidence == "matched 'Q2 was 41.5L' at line 2 of final_answer"
    assert not regex(pattern=r"^Q2").met  # no MULTILINE unless the pattern asks for it
    assert regex(pattern=r"(?m)^Q2").met
    outcome = regex(pattern=r"EXP-4\d\d")
    assert not outcome.met and outcome.evidence == f"pattern 'EXP-4\\d\\d' does not match final_answer ({len(ANSWER)} chars)"


def test_regex_errors_are_lint_errors_and_run_time_check_errors():
    spec = get_check("regex")
    config = spec.config_model.model_validate({"pattern": "EXP-(\\d+"})
    ((severity, code, message),) = spec.lint(config)
    assert (severity, code) == ("error", "invalid-regex") and message.startswith("pattern: invalid regex")
    with pytest.raises(CheckError, match="invalid regex"):
        regex(pattern="EXP-(\\d+")
