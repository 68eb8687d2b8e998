"""Trajectory adapters, auto-detected on load: fixtures built with each framework's own types (the SDK or package
installed in the test environment), and the committed fixtures in examples/adapters/."""
import json
import zipfile

import pytest
from rubric_fakes import REPO

import rubrics
from rubrics.trajectory.adapters import find_adapter
from rubrics.trajectory import TrajectoryError, iter_trajectory_file, load_trajectory

FIXTURES = REPO / "examples" / "adapters"
RUBRIC = """
version: 1
id: refund
task: refund the broken order
criteria:
  - {id: refunded, points: 2, tool_called: {name: refund_order, args: {amount: {number: 84.5, tolerance: 0.01}}}}
  - {id: looked-first, points: 1, tool_sequence: [get_order, refund_order]}
  - {id: says-amount, points: 1, contains: {text: "84.50"}}
"""


def shape(trajectory):
    return [(m.role, m.content, [(c.id, c.name, c.arguments) for c in m.tool_calls], m.tool_call_id)
            for m in trajectory.messages]


def test_openai_responses_items_built_with_the_sdk():
    types = pytest.importorskip("openai.types.responses")
    from openai.types.responses.response_input_item import FunctionCallOutput
    from openai.types.responses.response_reasoning_item import Summary

    items = [
        types.ResponseReasoningItem(id="rs_1", type="reasoning", summary=[Summary(type="summary_text", text="look")]),
        types.ResponseFunctionToolCall(id="fc_1", call_id="call_1", type="function_call", name="get_order",
                                       arguments='{"order_id": "A-17"}'),
        FunctionCallOutput(type="function_call_output", call_id="call_1", output="total 84.5"),
        types.ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed", content=[
            types.ResponseOutputText(type="output_text", text="Refunded 84.50.", annotations=[])]),
    ]
    data = [item.model_dump(mode="json") for item in items]
    assert find_adapter(data).name == "openai-responses"
    trajectory = load_trajectory(data)
    assert shape(trajectory) == [("assistant", None, [("call_1", "get_order", {"order_id": "A-17"})], None),
                                 ("tool", "total 84.5", [], "call_1"), ("assistant", "Refunded 84.50.", [], None)]
    assert trajectory.messages[0].reasoning == "look" and trajectory.final_text() == "Refunded 84.50."
    response = types.Response(id="resp_1", object="response", created_at=0, model="gpt-4.1", output=items[1:2],
                              parallel_tool_calls=True, tool_choice="auto", tools=[], instructions="be brief")
    from_response = load_trajectory(response.model_dump(mode="json"))
    assert from_response.id == "resp_1" and [m.role for m in from_response.messages] == ["system", "assistant"]


def test_the_committed_responses_fixture_is_sdk_shaped_and_grades():
    pytest.importorskip("openai")
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    data = json.loads((FIXTURES / "openai-responses.json").read_text())
    TypeAdapter(list[ResponseInputItemParam]).validate_python(data)
    result = rubrics.score(FIXTURES / "openai-responses.json", RUBRIC)
    assert (result.earned, result.total) == (4, 4), result.items


def test_responses_items_with_typeless_easy_input_messages(tmp_path):
    items = [{"role": "system", "content": "be brief"},
             {"role": "user", "content": [{"type": "input_text", "text": "refund the broken order A-17"}]},
             {"type": "function_call", "call_id": "call_1", "name": "get_order", "arguments": '{"order_id": "A-17"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "total 84.5"},
             {"type": "function_call", "call_id": "call_2", "name": "refund_order", "arguments": '{"amount": 84.5}'},
             {"type": "function_call_output", "call_id": "call_2", "output": "ok"},
             {"role": "assistant", "content": "Refunded 84.50."}]
    assert find_adapter(items).name == "openai-responses"
    trajectory = load_trajectory(items)
    assert [m.role for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                      "assistant"]
    assert trajectory.messages[1].content == "refund the broken order A-17"
    assert trajectory.final_text() == "Refunded 84.50."
    path = tmp_path / "responses.json"
    path.write_text(json.dumps({"input": items}))
    result = rubrics.score(path, RUBRIC)
    assert (result.earned, result.total) == (4, 4), result.items
    pytest.importorskip("openai")
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    TypeAdapter(list[ResponseInputItemParam]).validate_python(items)   # the SDK's own input type takes them


def test_a_list_of_typeless_messages_alone_is_still_a_chat_message_list():
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert find_adapter(chat) is None
    assert [m.role for m in load_trajectory(chat).messages] == ["user", "assistant"]


def test_anthropic_messages_with_tool_use_and_tool_result_blocks():
    anthropic = pytest.importorskip("anthropic.types")
    reply = anthropic.Message(id="msg_1", type="message", role="assistant", model="claude", stop_reason="tool_use",
                              stop_sequence=None, usage=anthropic.Usage(input_tokens=1, output_tokens=1),
                              content=[anthropic.ThinkingBlock(type="thinking", thinking="check first", signature="s"),
                                       anthropic.TextBlock(type="text", text="Looking it up."),
                                       anthropic.ToolUseBlock(type="tool_use", id="toolu_1", name="get_order",
                                                              input={"order_id": "A-17"})])
    assert load_trajectory(reply.model_dump(mode="json")).messages[0].tool_calls[0].name == "get_order"
    conversation = [{"role": "user", "content": "refund A-17"}, reply.model_dump(mode="json", include={"role", "content"}),
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "84.5",
                                                  "is_error": False},
                                                 {"type": "text", "text": "and be quick"}]}]
    trajectory = load_trajectory(conversation)
    assert shape(trajectory) == [("user", "refund A-17", [], None),
                                 ("assistant", "Looking it up.", [("toolu_1", "get_order", {"order_id": "A-17"})], None),
                                 ("tool", "84.5", [], "toolu_1"), ("user", "and be quick", [], None)]
    assert trajectory.messages[1].reasoning == "check first"


def test_the_committed_anthropic_fixture_is_sdk_shaped_and_grades():
    pytest.importorskip("anthropic")
    from anthropic.types import MessageParam
    from pydantic import TypeAdapter

    data = json.loads((FIXTURES / "anthropic-messages.json").read_text())
    TypeAdapter(list[MessageParam]).validate_python(data["messages"])
    trajectory = load_trajectory(FIXTURES / "anthropic-messages.json")
    assert trajectory.messages[0].role == "system" and [m.role for m in trajectory.messages].count("tool") == 2
    result = rubrics.score(trajectory, RUBRIC)
    assert (result.earned, result.total) == (4, 4), result.items


def test_swe_agent_traj_steps_become_tool_calls():
    trajectory = load_trajectory(FIXTURES / "marshmallow-code__marshmallow-1867.traj")
    assert trajectory.id == "marshmallow-code__marshmallow-1867"   # the file name: a .traj holds no id
    assert [c.name for c in trajectory.tool_calls()] == ["find_file", "edit", "submit"]
    assert trajectory.messages[0].content.startswith("We're currently solving")
    assert trajectory.final_answer.startswith("diff --git") and trajectory.state.exit_status == "submitted"
    rubric = """
version: 1
id: swe
task: fix the rounding
criteria:
  - {id: flow, points: 1, tool_sequence: [find_file, edit, submit]}
  - {id: uses-round, points: 1, contains: {text: "int(round("}}
"""
    assert rubrics.score(trajectory, rubric).reward == 1.0
    bad = {"trajectory": [{"action": 5, "observation": ""}], "info": {}}
    with pytest.raises(TrajectoryError, match="swe-agent: field trajectory\\[0\\].action: expected text"):
        load_trajectory(bad)


def test_committed_inspect_json_log_gives_one_trajectory_per_sample():
    entries = list(iter_trajectory_file(FIXTURES / "inspect-log.json"))
    assert [e.id for e in entries] == ["refund-a0", "refund-a1"]
    first = entries[0]
    assert [c.name for c in first.tool_calls()] == ["get_order"] and first.tool_calls()[0].arguments == {
        "order_id": "A-0"}
    assert first.final_answer.startswith("Order A-0 was delivered")
    assert first.metadata["inspect"]["scores"] == {"includes": "C"} and first.metadata["inspect"]["target"] == "84.50"
    with pytest.raises(TrajectoryError, match="holds 2 trajectories"):
        load_trajectory(json.loads((FIXTURES / "inspect-log.json").read_text()))
    results = rubrics.score_many([FIXTURES / "inspect-log.json"], "version: 1\nid: r\ntask: t\ncriteria:\n"
                                 "  - {id: looked, points: 1, tool_called: {name: get_order}}\n")
    assert [(r.trajectory_id, r.reward) for r in results] == [("refund-a0", 1.0), ("refund-a1", 1.0)]


def test_a_real_inspect_eval_log_is_read(tmp_path, monkeypatch):
    """A real `inspect_ai.eval()` on its mock model, with a tool, writes a .eval log; each sample grades."""
    inspect_ai = pytest.importorskip("inspect_ai")
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import tool

    @tool
    def get_order():
        async def execute(order_id: str):
            """Look up an order.

            Args:
                order_id: The order id.
            """
            return f"order {order_id}: 84.50 EUR"
        return execute

    outputs = []
    for i in range(2):
        outputs += [ModelOutput.for_tool_call("mockllm/model", "get_order", {"order_id": f"A-{i}"}),
                    ModelOutput.from_content("mockllm/model", f"Refunded 84.50 for A-{i}.")]
    for output in outputs:   # set usage: else the mock model counts tokens with a tokenizer it downloads
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    task = inspect_ai.Task(dataset=[Sample(input=f"Refund A-{i}", target="84.50", id=f"s{i}") for i in range(2)],
                           solver=[use_tools(get_order()), generate()], scorer=includes())
    [log] = inspect_ai.eval(task, model=get_model("mockllm/model", custom_outputs=outputs), log_dir=str(tmp_path),
                            log_format="eval", display="none", max_samples=1)
    assert log.status == "success"
    path = next(tmp_path.glob("*.eval"))
    entries = list(iter_trajectory_file(path))
    assert [e.id for e in entries] == ["s0", "s1"]
    assert [[c.arguments for c in e.tool_calls()] for e in entries] == [[{"order_id": "A-0"}], [{"order_id": "A-1"}]]
    assert entries[1].final_answer == "Refunded 84.50 for A-1." and entries[0].source.endswith("s0_epoch_1.json")
    rubric = "version: 1\nid: r\ntask: t\ncriteria:\n  - {id: a, points: 1, contains: {text: '84.50'}}\n"
    assert [r.reward for r in rubrics.score_many([path], rubric)] == [1.0, 1.0]
    import rubrics.trajectory.adapters.inspect_log as inspect_log

    # inspect_ai hands the samples over one at a time: the first arrives before the second is read
    reader = inspect_log.InspectLog().read_file(path)
    assert next(reader)[0] == "samples/s0_epoch_1.json"
    assert [where for where, _ in reader] == ["samples/s1_epoch_1.json"]

    monkeypatch.setattr(inspect_log, "_inspect_installed", lambda: False)   # the zip reader, without the package
    plain = list(iter_trajectory_file(path))
    assert [e.model_dump() for e in plain] == [e.model_dump() for e in entries]
    assert plain[0].metadata["inspect"]["model"] == "mockllm/model"


def test_a_broken_or_oversized_eval_file_is_a_load_error_not_a_crash(tmp_path, monkeypatch):
    import rubrics.trajectory.adapters.inspect_log as inspect_log

    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    [error] = list(iter_trajectory_file(broken))
    assert "not a readable Inspect .eval log" in str(error)
    big = tmp_path / "big.eval"
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", "{}")
        archive.writestr("samples/x_epoch_1.json", "0" * 5000)
    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 1000)
    [error] = list(iter_trajectory_file(big))
    assert "samples/x_epoch_1.json is larger than the limit" in str(error)


def test_our_format_and_plain_chat_messages_need_no_adapter():
    from trajectory_factory import README_EXAMPLE

    assert find_adapter(README_EXAMPLE) is None
    assert find_adapter([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]) is None
    assert find_adapter({"id": "x", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}) is None
