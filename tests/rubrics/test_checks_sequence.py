"""tool_sequence (order, strict adjacency) and tool_called's numeric tolerance on arguments."""
from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

import rubrics
from rubrics.checks import get_check, run_check, validate_config


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"name": name, "arguments": arguments}]}


SUPPORT = make_trajectory(messages=[
    call("get_order", order_id="A-17"),
    call("lookup_policy", topic="refunds"),
    call("refund_order", order_id="A-17", amount=84.5),
    call("notify", channel="email"),
])


def seq(config, trajectory=SUPPORT):
    return run_check("tool_sequence", config, trajectory)


def test_in_order_with_others_between():
    outcome = seq(["get_order", "refund_order"])
    assert outcome.met and outcome.evidence == "called get_order → refund_order in order (calls #1, #3 of 4)"
    assert seq(["get_*", "refund_*", "notify"]).met
    assert seq(["get_order"]).met


def test_wrong_order_or_missing_is_unmet_and_says_where_it_broke_off():
    outcome = seq(["refund_order", "get_order"])
    assert not outcome.met
    assert "no call to 'get_order' after 'refund_order'" in outcome.evidence
    assert "tools called: get_order, lookup_policy, refund_order, notify" in outcome.evidence
    assert "no call to 'cancel'" in seq(["cancel", "get_order"]).evidence
    empty = seq(["get_order"], make_trajectory(messages=[]))
    assert not empty.met and empty.evidence.endswith("tools called: none")


def test_strict_wants_the_calls_back_to_back():
    assert not seq({"tools": ["get_order", "refund_order"], "strict": True}).met
    assert "in order, but not back to back" in seq({"tools": ["get_order", "refund_order"], "strict": True}).evidence
    outcome = seq({"tools": ["lookup_policy", "refund_order", "notify"], "strict": True})
    assert outcome.met and "calls #2, #3, #4" in outcome.evidence


def test_a_repeated_tool_needs_two_calls():
    assert not seq(["get_order", "get_order"]).met
    twice = make_trajectory(messages=[call("get_order"), call("x"), call("get_order")])
    assert seq(["get_order", "get_order"], twice).met
    assert not seq({"tools": ["get_order", "get_order"], "strict": True}, twice).met


def test_sequence_config_validation_and_lint():
    with pytest.raises(ValidationError):
        validate_config("tool_sequence", [])
    with pytest.raises(ValidationError):
        validate_config("tool_sequence", {"tools": ["a"], "strict": "yes"})
    with pytest.raises(ValidationError, match="Extra inputs"):
        validate_config("tool_sequence", {"tools": ["a"], "order": "any"})
    spec = get_check("tool_sequence")
    config = spec.config_model.model_validate(["ok", "bad[glob"])
    assert [(code, message.split(":")[0]) for _, code, message in spec.lint(config)] == [("invalid-glob", "tools[1]")]


def test_a_long_trajectory_is_checked_in_linear_time():
    many = make_trajectory(messages=[call(f"t{i % 50}") for i in range(20_000)])
    import time

    started = time.perf_counter()
    assert not seq(["t1", "t2", "missing"], many).met
    assert not seq({"tools": ["t3", "t1"], "strict": True}, many).met
    assert time.perf_counter() - started < 5


def tool(**config):
    return run_check("tool_called", config, SUPPORT)


def test_numeric_tolerance_on_arguments():
    assert tool(name="refund_order", args={"amount": {"number": 84.50, "tolerance": 0.01}}).met
    assert tool(name="refund_order", args={"amount": {"number": 84.51, "tolerance": 0.01}}).met   # float edge
    assert not tool(name="refund_order", args={"amount": {"number": 84.52, "tolerance": 0.01}}).met
    assert tool(name="refund_order", args={"amount": {"number": 84.5}}).met   # tolerance 0: equal
    assert not tool(name="refund_order", args={"amount": {"number": 84}}).met
    text_amount = make_trajectory(messages=[call("refund_order", amount="84.499"), call("refund_order", amount=True)])
    assert run_check("tool_called", {"name": "refund_order", "args": {"amount": {"number": 84.5, "tolerance": 0.01}}},
                     text_amount).met
    assert not run_check("tool_called", {"name": "refund_order", "args": {"amount": {"number": 1, "tolerance": 0}}},
                         text_amount).met   # true is not 1
    assert not tool(name="get_order", args={"order_id": {"number": 17, "tolerance": 1000}}).met


@pytest.mark.parametrize("spec, message", [
    ({"number": "84.5"}, "number must be a finite number"),
    ({"number": 84.5, "tolerance": -1}, "tolerance must be a number >= 0"),
    ({"number": 84.5, "tol": 1}, "unknown key 'tol'"),
    ({"number": float("nan")}, "number must be a finite number"),
])
def test_a_bad_numeric_match_is_a_config_error_naming_the_argument(spec, message):
    with pytest.raises(ValidationError, match=f"args.amount: {message}"):
        validate_config("tool_called", {"name": "refund_order", "args": {"amount": spec}})


def test_the_issue_rubric_grades_end_to_end_and_lints_clean():
    rubric = """
version: 1
id: support
task: refund the order
criteria:
  - {id: refund-amount, points: 2, tool_called: {name: refund_order, args: {amount: {number: 84.50, tolerance: 0.01}}}}
  - {id: looked-first, points: 1, tool_sequence: [get_order, refund_order]}
  - {id: adjacent, points: 1, tool_sequence: {tools: [get_order, refund_order], strict: true}}
"""
    result = rubrics.score(SUPPORT.model_dump(mode="json", by_alias=True), rubric)
    assert [(i.id, i.status) for i in result.items] == [("refund-amount", "met"), ("looked-first", "met"),
                                                        ("adjacent", "unmet")]
    assert (result.earned, result.total) == (3, 4)
