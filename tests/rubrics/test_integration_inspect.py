"""rubrics.integrations.inspect: a real inspect_ai.eval() of a two-sample task on Inspect's mock model, scored by
rubric_scorer; each Score is the rubric's result on the same conversation."""
from __future__ import annotations

import pytest

pytest.importorskip("inspect_ai", reason="needs the [inspect] extra")

import rubrics  # noqa: E402
from rubrics.integrations.inspect import rubric_scorer, state_trajectory  # noqa: E402

RUBRIC = r"""
version: 1
id: capital
task: Name the capital of France and cite your source.
gates:
  - {id: answers, contains: {text: Paris}}
criteria:
  - {id: cites, points: 2, regex: {pattern: "(?i)source:"}}
  - {id: brief, points: 1, regex: {pattern: "^.{0,60}$"}}
"""
REPLIES = ["Paris. Source: the French constitution, article 2.", "I believe it is Lyon."]


def run_eval(tmp_path, scorer, samples):
    from inspect_ai import Task, eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.solver import generate

    outputs = [ModelOutput.from_content("mockllm/model", reply) for reply in REPLIES]
    for output in outputs:   # given usage, the mock model counts no tokens (that would download tiktoken's tables)
        output.usage = ModelUsage(input_tokens=8, output_tokens=8, total_tokens=16)
    model = get_model("mockllm/model", custom_outputs=outputs)
    task = Task(dataset=samples, solver=generate(), scorer=scorer)
    [log] = eval(task, model=model, log_dir=str(tmp_path), display="none", max_samples=1)
    return log


def samples(**metadata):
    from inspect_ai.dataset import Sample

    return [Sample(id=f"s{i}", input="What is the capital of France?", target="Paris", metadata=metadata)
            for i in (1, 2)]


def test_eval_on_the_mock_model_scores_each_sample_with_the_rubric(tmp_path):
    log = run_eval(tmp_path, rubric_scorer(RUBRIC), samples())
    assert log.status == "success", log.error
    by_id = {sample.id: sample for sample in log.samples}
    assert [by_id[s].output.completion for s in ("s1", "s2")] == REPLIES
    for sample_id, expected_score in (("s1", 1.0), ("s2", 0.0)):
        sample = by_id[sample_id]
        [score] = sample.scores.values()
        messages = [{"role": m.role, "content": m.text} for m in sample.messages]
        expected = rubrics.score({"id": sample_id, "task_id": sample_id, "messages": messages}, RUBRIC)
        assert score.value == expected.score == expected_score
        assert score.metadata == expected.to_dict()
        assert score.answer == sample.output.completion
        status = {item.id: item.status for item in expected.items}
        assert score.explanation.splitlines() == [
            f"{status['answers']} [gate] answers: " + expected.items[0].evidence,
            f"{status['cites']} [+2] cites: " + expected.items[1].evidence,
            f"{status['brief']} [+1] brief: " + expected.items[2].evidence]
    [metrics] = [s.metrics for s in log.results.scores]
    assert metrics["mean"].value == 0.5


def test_each_sample_may_carry_its_own_rubric_and_an_incomplete_result_errors_the_sample(tmp_path):
    judged = RUBRIC.replace("id: capital", "id: capital-judged") + "  - {id: tone, points: 1, judge: polite}\n"
    log = run_eval(tmp_path / "own", rubric_scorer(), samples(rubric=RUBRIC))
    assert [s.scores["rubric_scorer"].metadata["rubric_id"] for s in log.samples] == ["capital", "capital"]

    log = run_eval(tmp_path / "raise", rubric_scorer(judged, judge=rubrics.NoJudge()), samples())
    assert log.status == "error" and "IncompleteResultError" in log.error.message

    log = run_eval(tmp_path / "nan", rubric_scorer(judged, judge=rubrics.NoJudge(), on_error="nan"), samples())
    values = [s.scores["rubric_scorer"].value for s in log.samples]
    assert all(value != value for value in values)   # NaN, with the reason in the metadata
    assert all(s.scores["rubric_scorer"].metadata["complete"] is False for s in log.samples)


def test_the_trajectory_keeps_tool_calls_and_tool_errors():
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser, ModelOutput
    from inspect_ai.solver import TaskState
    from inspect_ai.tool import ToolCall, ToolCallError

    state = TaskState(model="mockllm/model", sample_id=3, epoch=1, input="Refund order 7", messages=[
        ChatMessageUser(content="Refund order 7"),
        ChatMessageAssistant(content="", tool_calls=[ToolCall(id="c1", function="refund_order",
                                                              arguments={"order": 7})]),
        ChatMessageTool(content="", tool_call_id="c1", function="refund_order",
                        error=ToolCallError(type="permission", message="not allowed")),
        ChatMessageAssistant(content="I could not refund it.")], output=ModelOutput())
    loaded = rubrics.load_trajectory(state_trajectory(state))
    assert [(c.name, c.arguments) for c in loaded.tool_calls()] == [("refund_order", {"order": 7})]
    assert loaded.messages[2].content == "error: not allowed" and loaded.messages[2].tool_call_id == "c1"
    assert loaded.id == "3" and loaded.final_text() == "I could not refund it."


def test_without_inspect_ai_the_import_says_which_extra_to_install(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "inspect_ai", None)   # as if it were not installed
    monkeypatch.delitem(sys.modules, "rubrics.integrations.inspect")
    with pytest.raises(rubrics.MissingExtraError, match=r"install it with: pip install 'agent-rubrics\[inspect\]'"):
        importlib.import_module("rubrics.integrations.inspect")
