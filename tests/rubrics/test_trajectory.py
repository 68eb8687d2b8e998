from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trajectory_factory import readme_example

from pydantic import ValidationError

from rubrics.trajectory import (
    Message,
    ToolCall,
    Trajectory,
    TrajectoryError,
    TrajectoryLoadError,
    iter_trajectory_file,
    load_trajectory,
)


def test_readme_example_loads_with_every_field():
    t = load_trajectory(readme_example())
    assert (t.id, t.task_id) == ("attempt-03", "task-0417")
    assert [m.role for m in t.messages] == ["user", "assistant", "tool"]
    assert t.messages[1].tool_calls[0].arguments == {"to": ["cfo@acme.test"], "subject": "Q3 MIS"}
    assert t.messages[2].tool_call_id == "c1"
    email = t.emails()[0]
    assert (email.from_, email.to, email.subject) == ("agent@acme.test", ["cfo@acme.test"], "Q3 MIS")
    assert email.attachments[0].name == "Q3_MIS.pdf"
    assert t.state.files == {"reports/mis.md": "..."}
    assert t.state.tests == {"tests/test_totals.py::test_half_cent": "PASSED"}


def test_dump_uses_from_alias_and_leaves_source_out(tmp_path: Path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps(readme_example()))
    t = load_trajectory(path)
    assert t.source == f"{path}:1"
    dumped = t.model_dump(by_alias=True)
    assert "source" not in dumped
    assert dumped["state"]["outbox"][0]["from"] == "agent@acme.test"


def test_messages_share_their_bookkeeping_yet_each_dumps_and_reports_its_own_fields():
    """Messages and tool calls share pydantic's set of given fields between instances given the same declared
    fields, and keep no empty extras dict (format._CompactModel): what each reports and dumps must stay its own."""
    t = load_trajectory({"id": "t", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hi", "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"p": "."}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "latency_ms": 12},
        {"role": "user", "content": "again"},
    ]})
    first, second, third, fourth = t.messages
    assert first.model_fields_set is fourth.model_fields_set   # shared: same declared fields given
    assert first.model_fields_set == {"role", "content", "tool_calls"}
    assert third.model_fields_set == {"role", "tool_call_id", "content", "tool_calls", "latency_ms"}
    assert third.model_extra == {"latency_ms": 12} and third.latency_ms == 12
    assert first.model_extra is None and first == Message(role="user", content="hi")
    assert second.tool_calls[0].model_dump(exclude_unset=True) == {"id": "c1", "name": "ls", "arguments": {"p": "."}}
    assert third.model_dump(exclude_unset=True) == {"role": "tool", "content": "ok", "tool_calls": (),
                                                    "tool_call_id": "c1", "latency_ms": 12}
    assert [m.model_dump(exclude_unset=True) for m in t.messages][3] == {"role": "user", "content": "again",
                                                                        "tool_calls": ()}
    copy = first.model_copy(update={"name": "ann"})
    assert copy.name == "ann" and "name" in copy.model_fields_set and "name" not in first.model_fields_set


def test_messages_and_tool_calls_are_frozen_so_their_shared_bookkeeping_never_changes():
    t = load_trajectory({"id": "t", "messages": [{"role": "assistant", "tool_calls": [{"name": "ls"}]}]})
    with pytest.raises(ValidationError, match="frozen"):
        t.messages[0].content = "changed"
    with pytest.raises(ValidationError, match="frozen"):
        t.messages[0].tool_calls[0].name = "rm"


def test_undeclared_keys_are_never_added_to_the_shared_field_sets():
    """A hostile chat whose every message names a key of its own must not grow a table that outlives it."""
    from rubrics.trajectory import format as trajectory_format
    load_trajectory({"id": "t", "messages": [{"role": "user", f"k{n}": n} for n in range(2000)]})
    shared = trajectory_format._SHARED_FIELD_SETS
    assert len(shared) <= 2 ** 5 and all(names <= set(Message.model_fields) | set(ToolCall.model_fields)
                                         for names in shared)


def test_bare_openai_message_list_with_json_string_arguments():
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Send the MIS"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "send_email", "arguments": '{"to": "cfo@acme.test", "subject": "MIS"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": "Sent the MIS to the CFO."},
    ]
    t = load_trajectory(messages)
    call = t.tool_calls()[0]
    assert (call.id, call.name, call.arguments) == ("call_1", "send_email", {"to": "cfo@acme.test", "subject": "MIS"})
    assert t.final_text() == "Sent the MIS to the CFO."
    assert t.id.startswith("trajectory-")
    assert load_trajectory(messages).id == t.id  # the default id is deterministic


def test_bad_json_arguments_are_kept_raw():
    t = load_trajectory(
        [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]
    )
    assert t.tool_calls()[0].arguments == {"_raw": "{oops"}


def test_content_parts_are_flattened_and_tool_use_parts_become_calls():
    t = load_trajectory(
        [
            {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "tu1", "name": "search", "input": {"q": "travel"}},
                ],
            },
        ]
    )
    assert t.messages[0].content == "first\nsecond"
    image = load_trajectory([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:..."}}]}])
    assert image.messages[0].content == "[image_url]"
    assert t.messages[1].content == "calling"
    assert t.tool_calls()[0].arguments == {"q": "travel"}


def test_emails_come_from_send_email_calls_when_outbox_is_absent():
    data = readme_example()
    del data["state"]["outbox"]
    data["messages"][1]["tool_calls"][0]["arguments"] = {
        "to": "cfo@acme.test, ceo@acme.test",
        "cc": "Doe, Jane <jane@acme.test>",
        "subject": "Q3 MIS",
        "body": "attached",
        "attachments": ["Q3_MIS.pdf"],
    }
    email = load_trajectory(data).emails()[0]
    assert email.to == ["cfo@acme.test", "ceo@acme.test"]
    assert email.cc == ["Doe, Jane <jane@acme.test>"]
    assert (email.body, email.attachments[0].name) == ("attached", "Q3_MIS.pdf")


def test_empty_outbox_wins_over_tool_calls():
    data = readme_example()
    data["state"]["outbox"] = []
    assert load_trajectory(data).emails() == []


def test_final_text_prefers_final_answer_then_last_assistant_text():
    data = readme_example()
    assert load_trajectory(data).final_text().startswith("Q3 travel MIS")
    del data["final_answer"]
    data["messages"].append({"role": "assistant", "content": "done"})
    data["messages"].append({"role": "assistant", "content": "", "tool_calls": []})
    assert load_trajectory(data).final_text() == "done"
    assert load_trajectory({"id": "x"}).final_text() == ""


def test_validation_error_names_field_path():
    data = readme_example()
    data["messages"][2] = {"content": "no role"}
    with pytest.raises(TrajectoryError, match=r"field messages\.2\.role: Field required"):
        load_trajectory(data)


def test_jsonl_bad_line_is_yielded_and_the_rest_still_load(tmp_path: Path):
    good = readme_example()
    del good["id"]
    bad = readme_example()
    bad["state"]["outbox"][0]["attachments"] = [{"content": 3.5, "name": []}]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join([json.dumps(good), "{not json", "", json.dumps(bad), json.dumps(good)]) + "\n")
    entries = list(iter_trajectory_file(path))
    assert [type(e).__name__ for e in entries] == ["Trajectory", "TrajectoryLoadError", "TrajectoryLoadError", "Trajectory"]
    assert entries[0].id == "run:1" and entries[3].id == "run:5"
    assert entries[1].source == f"{path}:2" and "invalid JSON" in entries[1].message
    assert entries[2].source == f"{path}:4"
    assert "state.outbox.0.attachments.0.name" in entries[2].message
    assert isinstance(entries[2], Exception)


def test_json_file_with_list_of_trajectories_reports_each_start_line(tmp_path: Path):
    first, second = readme_example(), readme_example()
    second["messages"] = "not a list"
    path = tmp_path / "batch.json"
    path.write_text(json.dumps([first, second], indent=2))
    entries = list(iter_trajectory_file(path))
    assert isinstance(entries[0], Trajectory)
    assert isinstance(entries[1], TrajectoryLoadError)
    element_starts = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if line == "  {"]
    assert entries[0].source == f"{path}:{element_starts[0]}"
    messages_line = [n for n, line in enumerate(path.read_text().splitlines(), start=1) if '"messages": "not' in line]
    assert entries[1].source == f"{path}:{messages_line[0]}"  # the failing field, inside the second element
    assert element_starts[1] < messages_line[0]


def test_json_file_syntax_error_names_line_and_column(tmp_path: Path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "id": "a",\n  "messages": [,]\n}\n')
    with pytest.raises(TrajectoryError, match=r"broken\.json:3: column 16: invalid JSON"):
        load_trajectory(path)


def test_missing_file_is_an_entry_not_an_exception(tmp_path: Path):
    entries = list(iter_trajectory_file(tmp_path / "absent.jsonl"))
    assert len(entries) == 1 and "cannot read" in entries[0].message


def test_load_trajectory_refuses_a_file_with_several(tmp_path: Path):
    path = tmp_path / "two.jsonl"
    path.write_text(json.dumps(readme_example()) + "\n" + json.dumps(readme_example()) + "\n")
    with pytest.raises(TrajectoryError, match="holds 2 trajectories"):
        load_trajectory(path)


def test_load_trajectory_accepts_json_text_and_a_trajectory():
    t = load_trajectory(json.dumps(readme_example()))
    assert load_trajectory(t) is t
    with pytest.raises(TrajectoryError):
        load_trajectory(42)  # type: ignore[arg-type]


def test_numeric_ids_become_text():
    assert load_trajectory({"id": 7, "task_id": 3}).id == "7"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
trajectory_keys = st.sampled_from(
    ["id", "task_id", "messages", "final_answer", "state", "metadata", "role", "content", "tool_calls", "outbox", "files", "tests"]
)
shaped = st.dictionaries(trajectory_keys, json_values, max_size=6)
messages = st.lists(
    st.fixed_dictionaries({"role": json_values}, optional={"content": json_values, "tool_calls": json_values}), max_size=3
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_values, shaped, messages))
def test_random_json_only_ever_raises_trajectory_error(data):
    try:
        trajectory = load_trajectory(data)
    except TrajectoryError:
        return
    # What loads must also be usable by selectors and checks.
    trajectory.final_text()
    trajectory.emails()
    trajectory.tool_calls()


def test_json_file_validation_error_names_the_line_of_the_field(tmp_path: Path):
    data = readme_example()
    data["state"]["outbox"][0]["attachments"] = [{"content": "x"}, {"name": ["not", "text"]}]
    path = tmp_path / "one.json"
    text = json.dumps(data, indent=2)
    path.write_text(text)
    field_line = next(n for n, line in enumerate(text.splitlines(), start=1) if '"name": [' in line)
    with pytest.raises(TrajectoryError, match=rf"one\.json:{field_line}: field state\.outbox\.0\.attachments\.1\.name"):
        load_trajectory(path)


def test_bare_message_list_error_names_the_message_line(tmp_path: Path):
    path = tmp_path / "chat.json"
    path.write_text('[\n  {"role": "user", "content": "hi"},\n  {"content": "no role"}\n]\n')
    with pytest.raises(TrajectoryError, match=r"chat\.json:3: field messages\.1\.role: Field required"):
        load_trajectory(path)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(st.characters(exclude_categories=["Cs"]), max_size=30), json_values.map(json.dumps),
                          shaped.map(json.dumps)), max_size=6))
def test_jsonl_yields_one_entry_per_non_blank_line_and_never_raises(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("fuzz") / "run.jsonl"
    lines = [line.replace("\n", " ").replace("\r", " ") for line in lines]
    path.write_text("\n".join(lines), encoding="utf-8")
    text = path.read_text(encoding="utf-8-sig")
    entries = list(iter_trajectory_file(path))
    # Lines end at "\n" only: U+2028 and the other characters splitlines() breaks at are content. A line is blank
    # only when it holds nothing but JSON whitespace: a line of no-break spaces is a bad line.
    expected = len([line for line in text.split("\n") if line.strip(" \t\r\n")]) or 1  # an empty file is one error
    assert len(entries) == expected
    assert all(isinstance(e, Trajectory | TrajectoryLoadError) for e in entries)


def test_a_document_gives_each_short_string_value_one_object_and_forgets_them_after():
    from rubrics.trajectory.json_text import SHARED_STRING_CHARS, loads
    long_text = "x" * (SHARED_STRING_CHARS + 1)
    text = json.dumps([{"content": "ok", "long": long_text}, {"content": "ok", "long": long_text, "n": 1}])
    first, second = loads(text)
    assert first["content"] is second["content"] and first["long"] is not second["long"]
    assert first == {"content": "ok", "long": long_text} and second["n"] == 1
    assert loads(text)[0]["content"] is not first["content"]   # one table per document, none kept between them
