"""rubrics.integrations.verifiers in a live verifiers rollout: `rubric serve` (the embedded model) in a subprocess on
127.0.0.1 is the policy model, verifiers' own eval runner (`verifiers.v1.cli.eval.runner.run_eval`, what
`vf-eval` runs) generates every rollout through it, and RubricReward scores each finished trace.

Nothing is stubbed: the model calls go harness -> verifiers' interception server -> verifiers' EvalClient ->
`rubric serve` (/v1/chat/completions). The harness is the one thing written here, because the built-in chat
harnesses (`null`, `bash`) bootstrap `uv` and pip-install their script's dependencies at run time; this one runs
the same one-turn chat loop in-process with the openai client, which verifiers' Harness.launch documents as allowed
("a harness may run its loop in-process ... as long as every model call goes through `endpoint` + `secret`").

The rollouts reach verifiers as a plugin module (verifiers resolves tasksets and harnesses by id, importing the
module of that name), registered in sys.modules for the test.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers.v1", reason="needs the [verifiers] extra")

import rubrics  # noqa: E402
from rubrics.integrations.verifiers import RubricReward, trace_trajectory  # noqa: E402

pytestmark = pytest.mark.slow

SERVED = "policy"
PLUGIN = "rubric_rollout_plugin"           # the module verifiers imports for the taskset and harness id below
PLUGIN_ID = "rubric-rollout-plugin"
MAX_TOKENS = 16
ROLLOUTS_PER_TASK = 2
PROMPTS = ("What is the capital of France? Answer in one word.", "Say hello.")

# Code checks on the final answer (deterministic given the reply) and one judge item, judged by the same server.
RUBRIC = """
version: 1
id: live-reply
task: Answer the question briefly.
gates:
  - {id: replied, regex: {pattern: "\\\\S"}}
criteria:
  - {id: names-paris, points: 2, contains: {text: paris}}
  - {id: short, points: 1, regex: {pattern: "^.{0,120}$"}}
  - {id: judged-on-topic, points: 1, judge: the reply answers the user's question}
"""


@pytest.fixture(scope="module")
def embedded_model_path():
    from judge_engine.loading.weights import resolve_model_path

    try:
        return resolve_model_path(None)
    except Exception as exc:  # noqa: BLE001 - no network and no cache: the model cannot be served here
        pytest.skip(f"the embedded model is not available: {exc}")


@pytest.fixture(scope="module")
def serve(embedded_model_path, tmp_path_factory):
    from judge_engine.server.background import ServerProcess, free_port

    port = free_port()
    command = [sys.executable, "-m", "rubrics.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--served-model-name", SERVED, "--threads", "1"]
    log = str(tmp_path_factory.mktemp("serve") / "serve.log")
    with ServerProcess(command, port, log) as server:
        yield server


def make_plugin(judge: rubrics.OpenAIJudge) -> types.ModuleType:
    """A verifiers taskset (two prompts, the rubric as a weighted reward) and an in-process one-turn chat harness,
    exported via `__all__` as verifiers' loaders expect of a plugin module."""

    class LiveTask(vf.Task[vf.TaskData, vf.State]):
        rubric = RubricReward(RUBRIC, judge=judge, weight=2.0)

        @vf.reward(weight=0.5)
        async def brevity(self, trace) -> float:
            return 1.0 if len(trace.last_reply) < 200 else 0.0

    class LiveTaskset(vf.Taskset[LiveTask, vf.TasksetConfig]):
        def load(self):
            for i, prompt in enumerate(PROMPTS):
                yield LiveTask(vf.TaskData(id=f"q{i}", prompt=prompt), self.config.task)

    class InProcessChat(vf.Harness[vf.HarnessConfig]):
        """One chat turn, in-process: the prompt to the interception endpoint, the reply into the trace."""
        APPENDS_SYSTEM_PROMPT = True
        EXECUTES_CODE = False
        NEEDS_CONTAINER = False

        async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_):
            import openai

            system, prompt = self.resolve_prompt(data)
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": prompt})
            async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0, timeout=120) as client:
                await client.chat.completions.create(model=ctx.model, messages=messages)
            return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    module = types.ModuleType(PLUGIN)
    module.LiveTask, module.LiveTaskset, module.InProcessChat = LiveTask, LiveTaskset, InProcessChat
    module.__all__ = ["LiveTaskset", "InProcessChat"]
    return module


def assert_same_result(recorded: dict, expected: dict) -> None:
    """The Result RubricReward left on the trace is the one rubrics.score gives, verdict for verdict. Not compared
    exactly: the judge's token usage (the second grading finds the prompts in the server's prefix cache) and the
    judge probabilities, which may differ by float rounding between the server's batch shapes."""
    def exact(result: dict) -> dict:
        rest = {k: v for k, v in result.items() if k not in ("judge_usage", "expected_score", "items")}
        return {**rest, "items": [{k: v for k, v in item.items() if k != "probability"} for item in result["items"]]}

    assert exact(recorded) == exact(expected)
    assert [i["probability"] for i in recorded["items"]] == pytest.approx([i["probability"] for i in expected["items"]],
                                                                           abs=1e-4)
    assert recorded["expected_score"] == pytest.approx(expected["expected_score"], abs=1e-4)


def test_a_live_rollout_records_the_rubric_score_of_its_own_trajectory(serve, tmp_path, monkeypatch):
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    judge = rubrics.OpenAIJudge(base_url=serve.url + "/v1", model=SERVED, method="choice", max_retries=0)
    monkeypatch.setitem(sys.modules, PLUGIN, make_plugin(judge))
    monkeypatch.setenv("RUBRIC_SERVE_TEST_KEY", "unused")
    run_id_before = os.environ.get("VF_RUN_ID")
    config = EvalConfig.model_validate({
        "env": {"taskset": {"id": PLUGIN_ID},
                "agent": {"harness": {"id": PLUGIN_ID}, "runtime": {"type": "subprocess"}}},
        "model": SERVED,
        "client": {"type": "eval", "base_url": serve.url + "/v1", "api_key_var": "RUBRIC_SERVE_TEST_KEY"},
        "sampling": {"max_tokens": MAX_TOKENS, "temperature": 0.0},
        "num_rollouts": ROLLOUTS_PER_TASK,
        "max_concurrent": 2,
        "rich": None,
        "push": False,
        "output_dir": str(tmp_path / "outputs"),
    })
    try:
        episodes = asyncio.run(run_eval(config))
    finally:   # run_eval stamps its run id on the process environment for the processes it spawns
        if run_id_before is None:
            os.environ.pop("VF_RUN_ID", None)

    traces = [trace for episode in episodes for trace in episode.traces]
    assert len(traces) == len(PROMPTS) * ROLLOUTS_PER_TASK >= 2
    for episode in episodes:
        assert episode.ok, [e.message for e in episode.errors] + [e.message for t in episode.traces for e in t.errors]
    for trace in traces:
        # the reply came from `rubric serve` through verifiers' interception, within the token budget
        assert [call.model for call in trace.calls] == [SERVED]
        assert trace.calls[0].usage.completion_tokens <= MAX_TOKENS
        assert [m.role for m in trace.messages][-1] == "assistant" and trace.last_reply

        trajectory = trace_trajectory(trace.task.data, trace)
        assert trajectory["id"] == trace.id and trajectory["task_id"] == trace.task.data.id
        expected = rubrics.score(trajectory, RUBRIC, judge=judge)
        assert expected.complete and expected.reward is not None
        assert trace.rewards["rubric"].score == expected.reward and trace.rewards["rubric"].weight == 2.0
        assert_same_result(trace.info["rubric"], expected.to_dict())
        assert trace.metrics == {f"rubric/{item.id}": (1.0 if item.status == "met" else 0.0)
                                 for item in expected.items}
        brevity = 1.0 if len(trace.last_reply) < 200 else 0.0
        assert trace.reward == pytest.approx(2.0 * expected.reward + 0.5 * brevity)

    # what verifiers wrote to the run's traces.jsonl carries the same rewards
    out = Path(config.output_dir) / config.run.dir
    lines = (out / "traces.jsonl").read_text().splitlines()
    recorded = {}
    for line in lines:
        episode = vf.WireEpisode.model_validate(json.loads(line))
        for trace in episode.traces:
            recorded[trace.id] = (trace.rewards["rubric"].score, trace.reward)
    assert recorded == {trace.id: (trace.rewards["rubric"].score, trace.reward) for trace in traces}
