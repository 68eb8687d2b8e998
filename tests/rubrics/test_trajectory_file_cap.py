"""The size limit of a trajectory file (rubrics.input_files.MAX_TRAJECTORY_FILE_BYTES) and what loading costs.

A file over the limit is refused unread, with an error naming the file, its size and the limit; in a folder or a
dataset it is an error of that trajectory alone and the others still load. The limit is made small here
(monkeypatch) so that the files stay small.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from traced_memory import traced_peak

from rubrics import input_files
from rubrics.trajectory import Trajectory, TrajectoryError, TrajectoryLoadError, iter_trajectory_file, load_trajectory

RUBRIC = {"version": 1, "id": "a", "task": "t", "criteria": [{"id": "c", "points": 1, "contains": {"text": "hi"}}]}


def chat(trajectory_id: str, messages: int = 3) -> dict:
    return {"id": trajectory_id, "messages": [{"role": "assistant", "content": f"hi {n}"} for n in range(messages)]}


@pytest.fixture
def small_cap(monkeypatch) -> int:
    monkeypatch.setattr(input_files, "MAX_TRAJECTORY_FILE_BYTES", 4096)
    return 4096


def test_the_limit_is_256_mib():
    assert input_files.MAX_TRAJECTORY_FILE_BYTES == 256 << 20


@pytest.mark.parametrize("name", ["big.json", "big.jsonl", "big.traj"])
def test_a_file_over_the_limit_is_one_error_naming_the_file_its_size_and_the_limit(tmp_path, small_cap, name):
    path = tmp_path / name
    path.write_text(json.dumps(chat("big", 200)) + "\n")
    size = path.stat().st_size
    assert size > small_cap
    outcomes = list(iter_trajectory_file(path))
    assert len(outcomes) == 1 and isinstance(outcomes[0], TrajectoryLoadError)
    assert str(outcomes[0]) == (f"{path}: cannot read: it holds {size} bytes, more than the limit of "
                                f"{small_cap} bytes")
    with pytest.raises(TrajectoryError, match=f"{path}: cannot read: it holds {size} bytes"):
        load_trajectory(path)


def test_the_message_gives_the_limit_in_mib_too(tmp_path, monkeypatch):
    monkeypatch.setattr(input_files, "MAX_TRAJECTORY_FILE_BYTES", 1 << 20)
    path = tmp_path / "big.json"
    path.write_text(json.dumps(chat("big", 70_000)))
    error = list(iter_trajectory_file(path))[0]
    assert isinstance(error, TrajectoryLoadError)
    assert f"more than the limit of {1 << 20} bytes (1 MiB)" in str(error)


def test_a_file_at_the_limit_loads(tmp_path, small_cap):
    text = json.dumps(chat("edge", 1))
    path = tmp_path / "edge.json"
    path.write_text(text + " " * (small_cap - len(text)))
    assert path.stat().st_size == small_cap
    assert load_trajectory(path).id == "edge"


def test_a_file_over_the_limit_in_a_folder_costs_only_itself(tmp_path, small_cap):
    from rubrics.trajectory.paths import read_paths as collect_trajectories

    (tmp_path / "a.json").write_text(json.dumps(chat("a")))
    (tmp_path / "b.json").write_text(json.dumps(chat("b", 300)))   # over the limit
    (tmp_path / "c.jsonl").write_text(json.dumps(chat("c1")) + "\n" + json.dumps(chat("c2")) + "\n")
    loaded, errors = collect_trajectories([str(tmp_path)])
    assert [t.id for t in loaded] == ["a", "c1", "c2"]
    size = (tmp_path / "b.json").stat().st_size
    assert errors == [f"{tmp_path / 'b.json'}: error: cannot read: it holds {size} bytes, more than the limit of "
                      f"{small_cap} bytes"]


def test_a_file_over_the_limit_in_a_dataset_costs_only_its_line(tmp_path, small_cap):
    from rubrics.grading.dataset import read_dataset

    (tmp_path / "r.json").write_text(json.dumps(RUBRIC))
    (tmp_path / "small.json").write_text(json.dumps(chat("small")))
    (tmp_path / "big.json").write_text(json.dumps(chat("big", 300)))
    dataset_path = tmp_path / "d.jsonl"
    dataset_path.write_text("\n".join(json.dumps({"trajectory": name, "rubric": "r.json"})
                                      for name in ("big.json", "small.json")) + "\n")
    dataset = read_dataset(dataset_path)
    assert [job.trajectory.id for job in dataset.jobs] == ["small"]
    size = (tmp_path / "big.json").stat().st_size
    assert len(dataset.errors) == 1
    assert dataset.errors[0].startswith(f"{dataset_path}:1: error: field trajectory: ")
    assert f"{tmp_path / 'big.json'}: cannot read: it holds {size} bytes, more than the limit of {small_cap}" \
        in dataset.errors[0]


# ------------------------------------------------------------------ what loading costs in memory

def short_message_chat(target_bytes: int) -> dict:
    """The costliest realistic shape per byte: a long chat of short messages, a third of them with a tool call."""
    rng, messages, size = random.Random(7), [], 0
    while size < target_bytes:
        n = len(messages)
        kind = rng.random()
        if kind < 0.4:
            message = {"role": "assistant", "content": "Let me check.",
                       "tool_calls": [{"id": f"c{n}", "name": "ls", "arguments": {"p": "."}}]}
        elif kind < 0.8:
            message = {"role": "tool", "tool_call_id": f"c{n - 1}", "content": "ok"}
        else:
            message = {"role": "user", "content": "continue"}
        messages.append(message)
        size += len(json.dumps(message)) + 2
    return {"id": "short", "messages": messages}


def test_loading_costs_a_bounded_multiple_of_the_file(tmp_path):
    """Allocations traced by Python (not RSS, so neither the machine nor the allocator matters). Measured: 7.3 times
    the file for this shape (13.6 while each message kept pydantic's own set of given fields and extras dict, and
    each parsed "ok" was a string object of its own)."""
    path = tmp_path / "short.json"
    path.write_text(json.dumps(short_message_chat(3_000_000)))
    size = path.stat().st_size
    trajectory, peak = traced_peak(lambda: load_trajectory(path))
    assert isinstance(trajectory, Trajectory) and len(trajectory.messages) > 30_000
    assert peak < 9 * size, f"peak {peak / size:.1f} times the file"


def test_minimal_messages_cost_a_bounded_multiple_of_the_file(tmp_path):
    """The costliest shape of all, every message `{"role": "a"}`: 19.8 times the file measured (42 before)."""
    path = tmp_path / "minimal.json"
    path.write_text(json.dumps({"id": "m", "messages": [{"role": "a"}] * 100_000}))
    size = path.stat().st_size
    trajectory, peak = traced_peak(lambda: load_trajectory(path))
    assert len(trajectory.messages) == 100_000
    assert peak < 24 * size, f"peak {peak / size:.1f} times the file"


def test_a_trajectory_of_more_messages_and_calls_than_the_limit_is_an_error_of_its_own(tmp_path, monkeypatch):
    """Each message or tool call is an object of some 600 bytes whatever its text: a file of minimal messages
    would cost fifty times its size. The count is checked on the parsed JSON, before any model is built."""
    from rubrics.trajectory import load as trajectory_load

    assert trajectory_load.MAX_MESSAGES_AND_CALLS == 1_000_000
    monkeypatch.setattr(trajectory_load, "MAX_MESSAGES_AND_CALLS", 5)
    many = chat("many", 4)
    many["messages"][0]["tool_calls"] = [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}]
    lines = tmp_path / "batch.jsonl"
    lines.write_text("\n".join(json.dumps(t) for t in (chat("before", 2), many, chat("after", 5))) + "\n")
    outcomes = list(iter_trajectory_file(lines))
    assert [o.id for o in outcomes if isinstance(o, Trajectory)] == ["before", "after"]
    error, = [o for o in outcomes if isinstance(o, TrajectoryLoadError)]
    assert str(error) == f"{lines}:2: holds 4 messages and 2 tool calls, more than the 5 a trajectory may hold in all"
