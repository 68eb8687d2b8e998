"""rubrics.integrations.verifiers: RubricReward scores traces through verifiers' own Task.score (decorated
rewards found on the task class, plugged rewards loaded by import path from TaskConfig.rewards, weights summed
into Trace.reward), on traces built with verifiers' message types."""
from __future__ import annotations

import asyncio

import pytest

vf = pytest.importorskip("verifiers.v1", reason="needs the [verifiers] extra")

import rubrics  # noqa: E402
from rubrics.integrations.verifiers import RubricReward, trace_trajectory  # noqa: E402
from verifiers.v1.configs.agent import AgentConfig  # noqa: E402
from verifiers.v1.errors import TaskError  # noqa: E402
from verifiers.v1.graph import MessageNode  # noqa: E402
from verifiers.v1.trace import AgentInfo, TraceTask  # noqa: E402
from verifiers.v1.types import AssistantMessage, ToolCall, ToolMessage, UserMessage  # noqa: E402

REFUND = """
version: 1
id: refund
task: Refund order 7 and confirm.
gates:
  - {id: refunded, tool_called: {name: refund_order, args: {order: 7}}}
criteria:
  - {id: confirms, points: 2, contains: {text: refunded}}
  - {id: cites-order, points: 1, regex: {pattern: "#7\\\\b"}}
"""
POLITE = """
version: 1
id: polite
task: Refund order 7 and confirm.
criteria:
  - {id: thanks, points: 1, contains: {text: thank}}
  - {id: judged, points: 1, judge: the reply is polite}
"""


class RefundData(vf.TaskData):
    rubric: str = REFUND


class RefundTask(vf.Task[RefundData, vf.State]):
    rubric = RubricReward(REFUND, weight=2.0, judge=rubrics.NoJudge())

    @vf.reward(weight=0.5)
    async def brevity(self, trace) -> float:
        return 1.0 if len(trace.last_reply) < 40 else 0.0


class PluggedTask(vf.Task[RefundData, vf.State]):
    """No rewards of its own: they come from TaskConfig.rewards."""


def make_trace(reply: str, order: int = 7, data: RefundData | None = None):
    messages = [UserMessage(content="Refund order 7 and confirm."),
                AssistantMessage(content=None, tool_calls=[
                    ToolCall(id="c1", name="refund_order", arguments=f'{{"order": {order}}}')]),
                ToolMessage(tool_call_id="c1", content="ok"),
                AssistantMessage(content=reply)]
    nodes = [MessageNode(parent=i - 1 if i else None, message=m, sampled=isinstance(m, AssistantMessage))
             for i, m in enumerate(messages)]
    data = data or RefundData(prompt="Refund order 7 and confirm.")
    return vf.Trace(task=TraceTask(type="RefundTask", data=data), agent=AgentInfo(config=AgentConfig()), nodes=nodes)


def test_a_decorated_rubric_reward_is_weighted_and_summed_by_task_score():
    trace = make_trace("Order #7 is refunded.")
    task = RefundTask(RefundData(prompt="Refund order 7 and confirm."))
    asyncio.run(task.score(trace))
    expected = rubrics.score(trace_trajectory(task.data, trace), REFUND)
    assert expected.score == 1.0
    assert trace.rewards["rubric"].score == 1.0 and trace.rewards["rubric"].weight == 2.0
    assert trace.reward == 2.0 * 1.0 + 0.5 * 1.0
    assert trace.metrics == {"rubric/refunded": 1.0, "rubric/confirms": 1.0, "rubric/cites-order": 1.0}
    assert trace.info["rubric"] == expected.to_dict() and expected.trajectory_id == trace.id

    wrong_order = make_trace("Order #8 is refunded, a long and winding confirmation.", order=8)
    asyncio.run(task.score(wrong_order))
    assert wrong_order.rewards["rubric"].score == 0.0 and wrong_order.metrics["rubric/refunded"] == 0.0
    assert wrong_order.reward == 0.0


def test_a_plugged_reward_reads_each_tasks_rubric_and_takes_the_configs_weight():
    config = vf.TaskConfig(rewards={"rubric": vf.RewardFunctionConfig(
        fn="rubrics.integrations.verifiers:task_rubric", weight=3.0)})
    scored = []
    for rubric, reply in ((REFUND, "Refunded."), (REFUND, "Done.")):
        data = RefundData(prompt="Refund order 7 and confirm.", rubric=rubric)
        trace = make_trace(reply, data=data)
        asyncio.run(PluggedTask(data, config).score(trace))
        expected = rubrics.score(trace_trajectory(data, trace), rubric).score
        assert trace.rewards["rubric"].score == expected and trace.reward == pytest.approx(3.0 * expected)
        scored.append(expected)
    assert scored == [2 / 3, 0.0]


def test_an_incomplete_result_errors_the_rollout_instead_of_scoring_it():
    data = RefundData(prompt="Refund order 7 and confirm.", rubric=POLITE)
    trace = make_trace("Thank you, refunded.", data=data)

    class PoliteTask(vf.Task[RefundData, vf.State]):
        rubric = RubricReward(judge=rubrics.NoJudge())   # NoJudge leaves the judge item unevaluated

    with pytest.raises(TaskError, match="IncompleteResultError"):
        asyncio.run(PoliteTask(data).score(trace))
    assert trace.rewards == {"rubric": None}   # verifiers' mark for "scoring did not run", not a 0.0

    class MaskedTask(vf.Task[RefundData, vf.State]):
        rubric = RubricReward(judge=rubrics.NoJudge(), on_error="zero")

    asyncio.run(MaskedTask(data).score(trace))
    assert trace.rewards["rubric"].score == 0.0 and trace.metrics == {"rubric/thanks": 1.0}
    assert trace.info["rubric"]["complete"] is False


def test_a_task_without_a_rubric_is_told_where_to_put_one():
    class Bare(vf.TaskData):
        pass

    class BareTask(vf.Task[Bare, vf.State]):
        rubric = RubricReward()

    with pytest.raises(TaskError, match="no 'rubric' field"):
        asyncio.run(BareTask(Bare(prompt="x")).score(make_trace("y")))


def test_without_verifiers_the_import_says_which_extra_to_install(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "verifiers.v1", None)   # as if it were not installed
    monkeypatch.delitem(sys.modules, "rubrics.integrations.verifiers")
    with pytest.raises(rubrics.MissingExtraError, match=r"pip install 'agent-rubrics\[verifiers\]'"):
        importlib.import_module("rubrics.integrations.verifiers")


def test_a_group_reward_grades_the_traces_of_an_episode_together_from_the_envs_finalize():
    from rubrics.integrations.verifiers import RubricGroupReward
    from rubrics.judges.protocol import Verdict
    from verifiers.v1.envs.best_of_n.env import BestOfNEnv
    from verifiers.v1.episode import Episode

    class RankingJudge:
        """Pointwise: met (0.55, a close call) only for the reply that does not name the order; side by side: prefers
        the replies that name order #7, clearly."""
        name = "ranking"

        def judge(self, requests):
            return [Verdict(met=p >= 0.5, probability=p)
                    for p in (0.45 if "#7" in r.context.evidence[0].text else 0.55 for r in requests)]

        def compare(self, requests):
            def says(context):
                return "#7" in context.evidence[0].text
            return [Verdict(met=True, probability=0.9 if says(r.context.first) > says(r.context.second) else
                            0.1 if says(r.context.first) < says(r.context.second) else 0.5) for r in requests]

    data = RefundData(prompt="Refund order 7 and confirm.", rubric=POLITE)
    traces = [make_trace(reply, data=data) for reply in ("Thank you, order #7 refunded.", "Thank you, refunded.",
                                                          "Refunded, thank you. Order #7 is done.")]
    episode = Episode(task=TraceTask(type="RefundTask", data=data), traces=traces)
    reward = RubricGroupReward(judge=RankingJudge(), comparisons=2, weight=2.0)

    class RankedEnv(BestOfNEnv):
        async def finalize(self, task, episode):
            await reward(task, episode)
            await super().finalize(task, episode)

    env = RankedEnv.__new__(RankedEnv)   # finalize reads only its config's threshold
    env.config = type("Config", (), {"threshold": 1.0})()
    asyncio.run(env.finalize(RefundTask(data), episode))
    expected = rubrics.score_group([trace_trajectory(data, t) for t in traces], POLITE, judge=RankingJudge(),
                                   comparisons=2)
    assert [t.rewards["rubric"].score for t in traces] == [r.score for r in expected]
    assert all(t.rewards["rubric"].weight == 2.0 for t in traces)
    assert [t.metrics["best"] for t in traces] == [float(r.score == max(x.score for x in expected)) for r in expected]
    places = [t.info["rubric"]["items"][1]["group"] for t in traces]
    assert [p["attempts"] for p in places] == [3, 3, 3] and places[1]["rank"] == 3
    # one of the three met the item alone; side by side, that one is a reply naming the order
    assert [t.metrics["rubric/judged"] for t in traces].count(1.0) == 1 and traces[1].metrics["rubric/judged"] == 0.0


def test_a_group_reward_on_the_embedded_judge_records_what_score_group_gives(tmp_path):
    import warnings

    from judge_models import tiny_judge_model
    from rubrics.integrations.verifiers import RubricGroupReward
    from verifiers.v1.episode import Episode

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a test model outside the catalog: uncalibrated, as intended here
        judge = rubrics.EmbeddedJudge(model=str(tiny_judge_model(str(tmp_path))), method="choice")
    data = RefundData(prompt="Refund order 7 and confirm.", rubric=POLITE)
    traces = [make_trace(reply, data=data) for reply in ("Thank you, refunded.", "Refunded.", "Thanks! Order #7 done.")]
    episode = Episode(task=TraceTask(type="RefundTask", data=data), traces=traces)
    asyncio.run(RubricGroupReward(judge=judge)(RefundTask(data), episode))
    expected = rubrics.score_group([trace_trajectory(data, t) for t in traces], POLITE, judge=judge)
    assert [t.rewards["rubric"].score for t in traces] == [r.score for r in expected]
    assert [t.info["rubric"]["items"][1]["group"]["rank"] for t in traces] == \
        [r.items[1].group.rank for r in expected]
