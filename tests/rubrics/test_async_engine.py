"""rubrics.ascore on the real engine (the tiny judge model): a caller arriving while another caller's judge call
runs joins that call's engine batches, step by step, instead of waiting for it to end (the engine's queue is
first come, first served: the late prompts are computed in the steps after the earlier prompts already waiting)."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
import torch

import rubrics
from judge_models import CFO_RUBRIC, cfo_trajectory_paths, tiny_judge_model
from rubrics.grading.batching import JudgeBatcher
from rubrics.judges.backends.embedded import EmbeddedJudge

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    # a small token budget per step, so the big call below runs for many steps
    return EmbeddedJudge(model=str(tiny_judge_model(str(tmp_path_factory.mktemp("judge-model")))), method="choice",
                         max_num_batched_tokens=128)


def _variants(copies: int) -> list[dict]:
    """The CFO example's trajectories, each in `copies` versions with its own note in the messages (so no two
    share their evidence, and the engine computes each)."""
    out = []
    for copy in range(copies):
        for path in cfo_trajectory_paths():
            trajectory = json.loads(path.read_text())
            if isinstance(trajectory, list):   # bare OpenAI chat messages
                trajectory = {"messages": trajectory}
            trajectory["id"] = f"{path.stem}-{copy}"
            trajectory["messages"].insert(1, {"role": "user", "content": f"Reference number {copy * 7919}."})
            out.append(trajectory)
    return out


def _verdicts(result) -> list:
    return [(item.id, item.status, item.probability) for item in result.items]


def test_a_late_caller_joins_the_running_calls_engine_steps_and_gets_the_same_verdicts(judge, monkeypatch):
    many = _variants(6)   # 48 trajectories: one big judge call
    [late_trajectory] = _variants(7)[-1:]
    batcher = JudgeBatcher(judge, window_ms=0, max_wait_ms=0)
    engine = judge.llm.engine
    # who added each request (each judge call runs in its own thread), and which requests each step computed
    caller: dict[str, int] = {}
    steps: list[set[str]] = []
    add_request, schedule = engine.add_request, engine.scheduler.schedule

    def recording_add(request_id, *args, **kwargs):
        caller[request_id] = threading.get_ident()
        return add_request(request_id, *args, **kwargs)

    def recording_schedule():
        out = schedule()
        steps.append({s.seq.request_id for s in out.scheduled})
        return out

    monkeypatch.setattr(engine, "add_request", recording_add)
    monkeypatch.setattr(engine.scheduler, "schedule", recording_schedule)
    big: dict = {}
    thread = threading.Thread(target=lambda: big.setdefault(
        "results", asyncio.run(rubrics.ascore_many(many, CFO_RUBRIC, batcher=batcher))))
    thread.start()
    deadline = time.monotonic() + 60
    while len(steps) < 2:   # the big call is in the engine
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.001)
    late = asyncio.run(rubrics.ascore(late_trajectory, CFO_RUBRIC, batcher=batcher))
    thread.join(120)
    monkeypatch.undo()

    assert batcher.stats.peak_calls_in_flight == 2 and batcher.stats.judge_calls == 2
    assert len(set(caller.values())) == 2
    # steps that computed prompts of both calls: the late call joined the running one's batches
    assert any(len({caller[r] for r in step}) == 2 for step in steps)
    assert not engine.has_unfinished_requests()
    # batch-invariant engine: the same verdicts whoever shares the batch
    [alone_late] = rubrics.score_many([late_trajectory], CFO_RUBRIC, judge=judge)
    alone_many = rubrics.score_many(many, CFO_RUBRIC, judge=judge)
    assert _verdicts(late) == _verdicts(alone_late)
    assert [_verdicts(r) for r in big["results"]] == [_verdicts(r) for r in alone_many]
    assert all(r.complete for r in [late, *big["results"]])
