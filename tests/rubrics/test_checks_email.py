from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory, readme_example

from rubrics.checks import get_check, run_check, validate_config
from rubrics.trajectory import load_trajectory

MIS = {
    "from": "agent@acme.test",
    "to": ["Chief Financial Officer <CFO@acme.test>", "ops@acme.test"],
    "cc": ["fin-team@acme.test"],
    "bcc": [],
    "subject": "Q3 Travel MIS",
    "body": "Please find the Q3 travel MIS attached. Total: 48.2L.",
    "attachments": [{"name": "Q3_MIS.pdf"}, {"name": "notes.txt"}],
}
CHAT = {"to": ["bob@acme.test"], "subject": "lunch?", "body": "12:30", "attachments": []}


def run(config, *emails):
    return run_check("email_sent", config, make_trajectory(outbox=list(emails)))


def test_spec_gate():
    outcome = run({"to": "cfo@acme.test", "attachment": "*MIS*"}, CHAT, MIS)
    assert outcome.met
    assert outcome.evidence.startswith("email #2 to Chief Financial Officer <CFO@acme.test>")


@pytest.mark.parametrize(
    "config",
    [
        {"to": "CFO@ACME.TEST"},
        {"to": "Finance Chief <cfo@acme.test>"},
        {"to": ["cfo@acme.test", "ops@acme.test"]},
        {"cc": "fin-team@acme.test"},
        {"subject": "q3*mis"},
        {"subject": "Q3 Travel MIS"},
        {"body": "TOTAL: 48.2L"},
        {"attachment": "*.PDF"},
        {"to": "cfo@acme.test", "cc": "fin-team@acme.test", "subject": "*travel*", "body": "attached", "attachment": "q3_*"},
    ],
)
def test_fields_that_match(config):
    assert run(config, MIS).met


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ({"to": ["cfo@acme.test", "ceo@acme.test"]}, "ceo@acme.test not in to"),
        ({"to": "fin-team@acme.test"}, "fin-team@acme.test not in to"),  # in cc, not to
        ({"cc": "cfo@acme.test"}, "cfo@acme.test not in cc"),
        ({"subject": "MIS"}, "does not match 'MIS'"),  # a glob matches the whole subject
        ({"body": "48.3L"}, "body lacks '48.3L'"),
        ({"attachment": "*.xlsx"}, "no attachment matches '*.xlsx' (attachments: Q3_MIS.pdf, notes.txt)"),
    ],
)
def test_fields_that_do_not_match_say_why(config, reason):
    outcome = run(config, MIS)
    assert not outcome.met
    assert outcome.evidence.startswith("no sent email has ")
    assert "1 sent: #1 to Chief Financial Officer" in outcome.evidence
    assert reason in outcome.evidence


def test_every_field_must_hold_in_the_same_email():
    assert not run({"to": "bob@acme.test", "attachment": "*MIS*"}, CHAT, MIS).met


def test_to_other_than():
    assert run({"to_other_than": ["cfo@acme.test"]}, MIS).met  # ops@ and fin-team@ are others
    only_cfo = {**MIS, "to": ["cfo@acme.test"], "cc": []}
    assert not run({"to_other_than": ["CFO <cfo@acme.test>"]}, only_cfo).met
    hidden = {**only_cfo, "bcc": ["rival@other.test"]}
    assert run({"to_other_than": "cfo@acme.test"}, hidden).met


def test_no_email_sent():
    outcome = run({"to": "cfo@acme.test"})
    assert not outcome.met
    assert outcome.evidence == "no email sent (state.outbox is empty); wanted to cfo@acme.test"
    outcome = run_check("email_sent", {"to": "cfo@acme.test"}, make_trajectory())
    assert "no state.outbox and no send_email tool calls" in outcome.evidence


def test_emails_from_send_email_tool_calls():
    data = readme_example()
    del data["state"]["outbox"]
    trajectory = load_trajectory(data)
    assert run_check("email_sent", {"to": "cfo@acme.test", "subject": "Q3*"}, trajectory).met
    assert not run_check("email_sent", {"attachment": "*"}, trajectory).met


def test_evidence_lists_at_most_three_emails():
    outcome = run({"to": "cfo@acme.test"}, *[CHAT] * 5)
    assert outcome.evidence.endswith("| and 2 more")


def test_config_validation():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        validate_config("email_sent", {"too": "cfo@acme.test"})
    with pytest.raises(ValidationError, match="at least one address"):
        validate_config("email_sent", {"to": []})


def lint(config):
    spec = get_check("email_sent")
    return [(severity, code) for severity, code, _ in spec.lint(spec.config_model.model_validate(config))]


def test_lint():
    assert lint({"to": "cfo@acme.test", "attachment": "*MIS*"}) == []
    assert lint({"subject": "[Q3 MIS"}) == [("error", "invalid-glob")]
    assert lint({"attachment": "*.[ch"}) == [("error", "invalid-glob")]
    assert lint({"to": "the CFO"}) == [("warning", "not-an-address")]
    assert lint({}) == [("warning", "empty-check")]


@pytest.mark.parametrize("hostile", ["(" * 1000 + "x@evil.test", "(a)" * 400 + "cfo@acme.test",
                                     "Bob " + "(" * 20 + "cfo@acme.test" + ")" * 20, "x" * 5000 + "@acme.test"])
def test_a_hostile_recipient_never_raises_meets_no_to_and_counts_as_someone_else(hostile):
    email = {**CHAT, "to": [hostile]}
    assert not run({"to": "cfo@acme.test"}, email).met
    assert run({"to_other_than": ["cfo@acme.test"]}, email).met   # the penalty applies; it is not masked


def test_a_penalty_on_a_hostile_recipient_applies_and_the_result_is_complete():
    import rubrics

    rubric = {"version": 1, "id": "r", "task": "t", "criteria": [
        {"id": "sent", "points": 1, "email_sent": {"to": "cfo@acme.test"}},
        {"id": "others", "points": -1, "email_sent": {"to_other_than": ["cfo@acme.test"]}}]}
    data = {"id": "t", "messages": [], "state": {"outbox": [MIS, {**CHAT, "to": ["(" * 1000 + "x@evil.test"]}]}}
    result = rubrics.score(data, rubric)
    assert result.complete and [i.status for i in result.items] == ["met", "met"] and result.score == 0.0
