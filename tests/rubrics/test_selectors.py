from __future__ import annotations

import pytest
from trajectory_factory import make_trajectory, readme_example

from rubrics.trajectory.selectors import KNOWN_SELECTOR_PREFIXES, Selection, is_valid_selector, select
from rubrics.trajectory import load_trajectory


@pytest.fixture
def trajectory():
    data = readme_example()
    data["messages"].append({"role": "assistant", "content": "Draft one."})
    data["state"]["files"]["data/q3.json"] = {"total": 4820000}
    data["state"]["budget"] = {"travel": {"q3": [41.5, 48.2]}}
    return load_trajectory(data)


def test_final_answer_is_the_default(trajectory):
    assert select(trajectory) == Selection("Q3 travel MIS ... Total travel spend: 48.2L ...")


def test_assistant_joins_all_assistant_text(trajectory):
    assert select(trajectory, "assistant").text == "Draft one."


def test_transcript_has_roles_tool_calls_and_final_answer(trajectory):
    text = select(trajectory, "transcript").text
    assert "[user] Prepare the Q3 travel MIS" in text
    assert '[assistant -> send_email({"to": ["cfo@acme.test"], "subject": "Q3 MIS"})]' in text
    assert "[tool] sent" in text
    assert text.endswith("[final_answer] Q3 travel MIS ... Total travel spend: 48.2L ...")


def test_emails_render_headers_and_body(trajectory):
    text = select(trajectory, "emails").text
    assert "To: cfo@acme.test" in text and "Subject: Q3 MIS" in text and "Attachments: Q3_MIS.pdf" in text


def test_files_and_one_file(trajectory):
    assert "== reports/mis.md ==" in select(trajectory, "files").text
    assert select(trajectory, "files.data/q3.json").text == '{"total": 4820000}'
    assert select(trajectory, "files.data/*.json").text == '{"total": 4820000}'
    both = select(trajectory, "files.*").text
    assert "== reports/mis.md ==" in both and "== data/q3.json ==" in both


def test_tool_calls(trajectory):
    assert select(trajectory, "tool_calls").text == 'send_email({"to": ["cfo@acme.test"], "subject": "Q3 MIS"})'


def test_state_paths_with_indices_and_dotted_keys(trajectory):
    assert select(trajectory, "state.budget.travel.q3[1]").text == "48.2"
    assert select(trajectory, "state.budget.travel.q3.0").text == "41.5"
    assert select(trajectory, "state.files.reports/mis.md").text == "..."
    assert select(trajectory, "state.outbox[0].from").text == "agent@acme.test"


def test_missing_data_is_empty_text_with_a_reason(trajectory):
    assert select(trajectory, "state.budget.hotel") == Selection(
        "", "state.budget.hotel not found: no key 'hotel' in state.budget"
    )
    assert "out of range (2 items)" in select(trajectory, "state.budget.travel.q3[5]").missing
    assert "no file matches 'nope.md'" in select(trajectory, "files.nope.md").missing
    empty = make_trajectory()
    for selector in ("final_answer", "assistant", "transcript", "emails", "files", "tool_calls"):
        selection = select(empty, selector)
        assert selection.text == "" and selection.missing


def test_renderings_are_cached_per_trajectory(trajectory):
    assert select(trajectory, "transcript") is select(trajectory, "transcript")


def test_selector_validation():
    assert all(is_valid_selector(s) for s in ("final_answer", "files.a.md", "state.x", "transcript"))
    assert not any(is_valid_selector(s) for s in ("final", "state.", "files.", "", "Emails"))
    assert "state." in KNOWN_SELECTOR_PREFIXES
    with pytest.raises(ValueError, match="unknown selector 'final'"):
        select(make_trajectory(), "final")
