"""Trajectories for the check and selector tests: the README's example trajectory, and a builder for variations."""

from __future__ import annotations

import copy
from typing import Any

from rubrics.trajectory import Trajectory, load_trajectory

README_EXAMPLE: dict[str, Any] = {
    "id": "attempt-03",
    "task_id": "task-0417",
    "messages": [
        {"role": "user", "content": "Prepare the Q3 travel MIS ..."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "name": "send_email", "arguments": {"to": ["cfo@acme.test"], "subject": "Q3 MIS"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sent"},
    ],
    "final_answer": "Q3 travel MIS ... Total travel spend: 48.2L ...",
    "state": {
        "outbox": [
            {
                "from": "agent@acme.test",
                "to": ["cfo@acme.test"],
                "cc": [],
                "bcc": [],
                "subject": "Q3 MIS",
                "body": "...",
                "attachments": [{"name": "Q3_MIS.pdf", "content": "..."}],
            }
        ],
        "files": {"reports/mis.md": "..."},
        "tests": {"tests/test_totals.py::test_half_cent": "PASSED"},
    },
    "metadata": {},
}


def readme_example() -> dict[str, Any]:
    return copy.deepcopy(README_EXAMPLE)


def make_trajectory(
    final_answer: str | None = None,
    messages: list[dict[str, Any]] | None = None,
    **state: Any,
) -> Trajectory:
    """A minimal trajectory; keyword arguments become `state` fields (outbox, files, tests, ...)."""
    data: dict[str, Any] = {"id": "t", "messages": messages or [], "state": state}
    if final_answer is not None:
        data["final_answer"] = final_answer
    return load_trajectory(data)
