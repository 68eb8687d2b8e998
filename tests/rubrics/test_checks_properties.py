"""Property test: whatever config a rubric gives a check, grading raises only the documented errors."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from trajectory_factory import readme_example

from rubrics.checks import CheckError, get_check, run_check
from rubrics.trajectory import load_trajectory

BUILTINS = ["email_sent", "number", "contains", "regex", "tool_called", "file", "json", "tests", "all_of", "any_of", "not"]
FIELDS = [
    "in", "to", "cc", "subject", "body", "attachment", "to_other_than", "label", "pattern", "expected", "tolerance",
    "text", "all", "case_sensitive", "name", "args", "min", "max", "path", "exists", "contains", "equals", "one_of",
    "matches", "fail_to_pass", "pass_to_pass",
]  # fmt: skip
tricky_text = st.sampled_from(
    ["", "(", "[a", "*", "48.2L", "0.5%", "±1", "-3", "final_answer", "state.x[0]", "files.*", "a..b", "a[0]", "Q3*", "cfo@acme.test", "\\"]
) | st.text(max_size=12)
scalars = st.none() | st.booleans() | st.integers(-5, 10**12) | st.floats(allow_nan=True, allow_infinity=True) | tricky_text
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(tricky_text, c, max_size=3), max_leaves=8)
any_config = st.dictionaries(st.sampled_from(FIELDS), values, max_size=5)
addresses = st.sampled_from(["cfo@acme.test", "CFO <cfo@acme.test>", "x@y", "nobody", ""]) | st.emails()
numbers = st.sampled_from(["48.2L", "4.82 Cr", "1,234", "0.5%", "(3)", "-1", "12 %", "1e3", "nan", "inf"]) | st.floats() | st.integers()
text_or_list = tricky_text | st.lists(tricky_text, max_size=3)
FIELD_VALUES = {
    "in": st.sampled_from(["final_answer", "transcript", "emails", "files", "files.*", "state.tests", "state.outbox[0]", "tool_calls", "assistant", "bogus"]),
    "to": addresses | st.lists(addresses, max_size=3),
    "cc": addresses | st.lists(addresses, max_size=3),
    "to_other_than": addresses | st.lists(addresses, max_size=3),
    "expected": numbers,
    "tolerance": numbers,
    "text": text_or_list,
    "args": st.dictionaries(st.sampled_from(["to", "subject", "q"]), scalars, max_size=2),
    "min": st.integers(-1, 3),
    "max": st.integers(-1, 3),
    "one_of": st.lists(values, max_size=3),
    "fail_to_pass": text_or_list | st.just(["tests/test_totals.py::test_half_cent"]),
    "pass_to_pass": text_or_list,
}  # fmt: skip


# Per key, groups of which a valid config has one field each.
REQUIRED = {
    "number": [["expected"], ["label", "pattern"]],
    "contains": [["text"]],
    "regex": [["pattern"]],
    "tool_called": [["name"]],
    "file": [["path"]],
    "json": [["equals", "one_of", "matches"]],
}


def field_names(key: str) -> list[str]:
    model = get_check(key).config_model
    return [field.alias or name for name, field in model.model_fields.items()]


def well_typed(name: str):
    return st.booleans() if name in ("all", "case_sensitive", "exists") else FIELD_VALUES.get(name, tricky_text)


def sometimes_anything(draw, typed):
    """One draw in ten is arbitrary JSON: configs mostly validate and reach run(), yet bad types still occur."""
    return draw(values) if draw(st.integers(0, 9)) == 0 else draw(typed)


@st.composite
def check_config(draw, key: str, depth: int = 0):
    if key in ("all_of", "any_of", "not"):
        if depth >= 2:
            return draw(values)
        child = st.sampled_from(BUILTINS).flatmap(lambda k: check_config(k, depth + 1).map(lambda c: {k: c}))
        children = draw(st.lists(child, min_size=1, max_size=3))
        return children[0] if key == "not" else children
    required = [draw(st.sampled_from(group)) for group in REQUIRED.get(key, [])]
    optional = draw(st.lists(st.sampled_from(field_names(key)), unique=True, max_size=3))
    if draw(st.integers(0, 9)) == 0:
        required = []  # sometimes leave out what the check needs
    return {name: sometimes_anything(draw, well_typed(name)) for name in [*required, *optional]}


@st.composite
def key_and_config(draw):
    key = draw(st.sampled_from(BUILTINS))
    return key, sometimes_anything(draw, check_config(key))


TRAJECTORY = load_trajectory(readme_example())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key_and_config())
def test_random_configs_raise_only_validation_or_check_errors(drawn):
    key, config = drawn
    try:
        outcome = run_check(key, config, TRAJECTORY)
    except ValidationError:
        event("invalid config")
        return
    except CheckError as error:
        assert "crashed" not in str(error)  # a deliberate grader error, not a built-in check's bug
        return
    event(f"ran {key}")
    assert isinstance(outcome.met, bool) and isinstance(outcome.evidence, str) and outcome.evidence
    spec = get_check(key)
    for severity, code, message in spec.lint(spec.config_model.model_validate(config)):
        assert severity in ("error", "warning") and code and message
