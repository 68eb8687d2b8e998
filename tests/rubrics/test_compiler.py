from rubric_fakes import EXAMPLE_RUBRIC, trajectory, yaml_text

import rubrics
from rubrics.rubric.compiler import CodeStep, JudgeStep, compile_rubric
from rubrics.judges.protocol import EvidenceBlock, JudgeExample

OPTIONS = yaml_text("""
    version: 1
    id: opts
    task: write the report
    reference: the total is 5
    judge: {evidence: [final_answer, emails], method: likelihood, mode: reasoned, max_tokens: 64, threshold: 0.6}
    gates:
      - {id: g, judge: the report exists}
    criteria:
      - id: a
        points: 2
        judge: {text: is accurate, method: choice, mode: direct, max_tokens: 16, threshold: 0.8}
      - id: b
        points: -1
        judge: invents numbers
        threshold: 0.7
        evidence: [transcript, state.missing.key]
        examples: [{evidence: "total 6", met: true}]
      - {id: c, points: 1, contains: {text: report}}
""")


def test_plan_keeps_item_order_and_splits_code_from_judge():
    plan = compile_rubric(rubrics.load_rubric(EXAMPLE_RUBRIC))
    assert [s.item.id for s in plan.steps] == ["mis-to-cfo", "total-spend", "flags-unsigned", "dept-breakdown",
                                               "compares-q2", "one-page", "untraceable", "emails-others"]
    assert [type(s) for s in plan.steps[:3]] == [CodeStep, CodeStep, JudgeStep]
    assert plan.steps[0].config.to_addresses == frozenset({"cfo@acme.test"})   # validated config model
    assert plan.needs_judge and len(plan.judge_steps) == 5


def test_options_precedence_item_then_rubric_then_default():
    plan = compile_rubric(rubrics.load_rubric(OPTIONS))
    g, a, b = plan.judge_steps
    assert (g.judge.method, g.judge.mode, g.judge.max_tokens, g.threshold, g.evidence) == \
        ("likelihood", "reasoned", 64, 0.6, ("final_answer", "emails"))
    assert (a.judge.method, a.judge.mode, a.judge.max_tokens, a.threshold) == ("choice", "direct", 16, 0.8)
    assert b.threshold == b.judge.threshold == 0.7 and b.evidence == ("transcript", "state.missing.key")
    assert b.judge.examples == (JudgeExample("total 6", True),)
    plain = compile_rubric(rubrics.load_rubric(OPTIONS.replace(
        "judge: {evidence: [final_answer, emails], method: likelihood, mode: reasoned, max_tokens: 64, threshold: 0.6}\n",
        ""))).judge_steps[0]
    assert (plain.judge.method, plain.judge.mode, plain.judge.max_tokens, plain.threshold, plain.evidence) == \
        (None, "direct", 128, 0.5, ("final_answer",))


def test_judge_requests_for_one_trajectory():
    plan = compile_rubric(rubrics.load_rubric(OPTIONS))
    traj = rubrics.load_trajectory(trajectory("The report: total 5.", id="t-9", messages=[
        {"role": "user", "content": "write it"}, {"role": "assistant", "content": "The report: total 5."}]))
    g, a, b = plan.judge_requests(traj)
    assert [(r.context.trajectory_id, r.item.id) for r in (g, a, b)] == [("t-9", "g"), ("t-9", "a"), ("t-9", "b")]
    assert (g.item.kind, g.item.points, g.item.penalty, g.item.tag) == ("gate", None, False, "[gate]")
    assert (b.item.kind, b.item.points, b.item.penalty, b.item.criterion, b.item.tag) == \
        ("criterion", -1, True, "invents numbers", "[-1]")
    assert a.item.tag == "[+2]"
    # each request carries its step's compiled JudgeItem, options resolved
    assert [r.item for r in (g, a, b)] == [s.judge for s in plan.judge_steps]
    ctx = a.context
    assert ctx.task == "write the report" and ctx.reference == "the total is 5" and ctx.trajectory_id == "t-9"
    assert g.context.evidence[0] == EvidenceBlock("final_answer", "The report: total 5.")
    # an empty selection is shown to the judge as what is missing, never as silence
    assert g.context.evidence[1].name == "emails" and g.context.evidence[1].text.startswith("[missing: ")
    assert b.context.evidence[1].text.startswith("[missing: state.missing.key")
    # items showing the same evidence list share one context object (built once): a shared prompt prefix
    assert g.context is a.context and g.context.evidence == a.context.evidence
    assert b.context is not a.context and [e.name for e in b.context.evidence] == ["transcript", "state.missing.key"]
    assert b.context.trajectory_id == "t-9" and b.context.task == ctx.task


def test_rubric_without_judge_items_needs_no_judge():
    plan = compile_rubric(rubrics.load_rubric(OPTIONS.split("gates:")[0] + "criteria:\n  - {id: c, points: 1, contains: {text: x}}\n"))
    assert not plan.needs_judge and plan.judge_requests(rubrics.load_trajectory(trajectory("x"))) == []
