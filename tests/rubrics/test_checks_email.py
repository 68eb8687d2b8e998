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
    assert outcome.evidence.startswith("email #2 (state.outbox #2) to Chief Financial Officer <CFO@acme.test>")


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
    assert "1 sent: #1 (state.outbox #1) to Chief Financial Officer" in outcome.evidence
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


def sent_by_calls(*turns, config=None):
    """A trajectory without state.outbox whose turns are (tool name, result text or None)."""
    messages = []
    for number, (name, result) in enumerate(turns, start=1):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{number}", "name": name, "arguments": {"to": ["cfo@acme.test"], "subject": "Q3 MIS"}}]})
        if result is not None:
            messages.append({"role": "tool", "tool_call_id": f"c{number}", "content": result})
    return run_check("email_sent", config or {"to": "cfo@acme.test"}, load_trajectory({"id": "t", "messages": messages}))


@pytest.mark.parametrize("name", ["cancel_send_email", "draft_send_email", "resend_email", "send_emails",
                                  "x___send_email", "__send_email"])
def test_a_tool_that_only_ends_like_a_sender_sends_nothing(name):
    outcome = sent_by_calls((name, "Sent."))
    assert not outcome.met and "no send_email tool calls" in outcome.evidence


@pytest.mark.parametrize("name", ["send_email", "gmail__send_email", "mail.send_email", "mail/send_email",
                                  "mail:send_email"])
def test_a_sender_whose_result_reports_no_failure_counts_and_the_evidence_names_the_call(name):
    outcome = sent_by_calls(("lookup", "{}"), (name, '{"status": "sent", "id": "m-1"}'))
    assert outcome.met
    assert outcome.evidence.startswith(f"email #1 ({name} call c2) to cfo@acme.test")


@pytest.mark.parametrize("result", [
    "Error: unknown tool x__send_email", "ERROR 550 mailbox unavailable", "Failed to send: quota exceeded",
    "Cancelled by the user", "cancelled", "[error] SMTP timeout", "Traceback (most recent call last): ...",
    "Permission denied", "Unknown tool: x__send_email", '{"error": "recipient rejected"}', '{"ok": false}',
    '{"success": false, "message": "not delivered"}', '{"status": "Cancelled"}', '{"status": "failed"}',
])
def test_a_send_whose_result_reports_a_failure_does_not_count_and_the_evidence_says_why(result):
    outcome = sent_by_calls(("x__send_email", result))
    assert not outcome.met
    assert "not counted, the send failed: x__send_email call c1: its result" in outcome.evidence


def test_an_error_flag_on_the_result_message_is_a_failure():
    data = {"id": "t", "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "send_email",
                                           "input": {"to": "cfo@acme.test"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": "mail server down"}]}]}
    outcome = run_check("email_sent", {"to": "cfo@acme.test"}, load_trajectory(data))
    assert not outcome.met and "is_error: true" in outcome.evidence


def test_a_failed_send_and_a_good_one_the_good_one_counts():
    outcome = sent_by_calls(("send_email", "Error: timeout"), ("send_email", "Message sent (id 7)."))
    assert outcome.met and outcome.evidence.startswith("email #1 (send_email call c2)")
    assert "send_email call c1: its result reads 'Error: timeout'" in outcome.evidence


def test_a_send_call_without_a_result_counts_as_logs_often_record_calls_only():
    assert sent_by_calls(("send_email", None)).met


def test_results_without_ids_answer_the_calls_in_order():
    data = {"id": "t", "messages": [
        {"role": "assistant", "tool_calls": [{"name": "send_email", "arguments": {"to": "a@x.test"}},
                                             {"name": "send_email", "arguments": {"to": "cfo@acme.test"}}]},
        {"role": "tool", "content": "sent"}, {"role": "tool", "content": "Error: bounced"}]}
    trajectory = load_trajectory(data)
    assert run_check("email_sent", {"to": "a@x.test"}, trajectory).met
    assert not run_check("email_sent", {"to": "cfo@acme.test"}, trajectory).met


def test_senders_names_the_tools_that_send_exactly():
    assert sent_by_calls(("crm_dispatch_message", "ok"), config={"to": "cfo@acme.test",
                                                                 "senders": ["crm_dispatch_message"]}).met
    outcome = sent_by_calls(("x__send_email", "ok"), config={"to": "cfo@acme.test", "senders": ["gmail__send_email"]})
    assert not outcome.met and "no gmail__send_email tool calls" in outcome.evidence
    with pytest.raises(ValidationError, match="name at least one tool"):
        validate_config("email_sent", {"senders": [" "]})


def test_a_penalty_counts_only_real_sends_too():
    # the penalised behaviour must have happened: a refused send to an outsider is no leak
    outcome = sent_by_calls(("send_email", "Rejected: external recipients are blocked"),
                            config={"to_other_than": ["ceo@acme.test"]})
    assert not outcome.met
