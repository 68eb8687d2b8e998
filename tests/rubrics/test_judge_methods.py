"""The judge method registry (rubrics/judges/methods/) is the one list of methods: it feeds the rubric's `method:`
field and its JSON Schema, `rubric judge-eval --method`, the embedded judge and the OpenAI-compatible judge."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rubrics.judges.backends.embedded import EmbeddedJudge
from rubrics.judges.fitted.judge_models import shipped_calibration
from rubrics.judges.methods import DEFAULT_HTTP_METHOD, DEFAULT_METHOD, IDENTITY, METHOD_CLASSES, METHOD_NAMES, \
    REASONING_METHOD, Calibration, JudgeMethod, PromptSpec, ScoredPrompt, make_method, method_name_for
from rubrics.judges.methods import choice
from rubrics.judges.backends.openai import OpenAIJudge
from rubrics.judges.prompt.prompts import Piece
from rubrics.judges.protocol import EvidenceBlock, JudgeContext, JudgeItem, JudgeRequest
from rubrics.judges.fitted.verdict_head import HeadProbe
from rubrics.rubric.spec import JudgeOptions

PROBE = HeadProbe((1,))
LOCAL_ONLY = [name for name, cls in METHOD_CLASSES.items() if not cls.over_http]
OVER_HTTP = [name for name, cls in METHOD_CLASSES.items() if cls.over_http]


def item(**fields) -> JudgeItem:
    return JudgeItem(**{"id": "a", "kind": "criterion", "points": 2, "criterion": "flags the expenses", **fields})


def test_the_registry_names_each_method_by_its_own_name():
    assert METHOD_NAMES == tuple(METHOD_CLASSES) and {"choice", "likelihood"} <= set(METHOD_NAMES)
    for name, cls in METHOD_CLASSES.items():
        assert issubclass(cls, JudgeMethod) and cls.name == name
        assert cls.description.startswith(f"{name}: ")
        assert isinstance(cls.over_http, bool)
        method = make_method(name, head=PROBE)   # the head method reads the judge's head; the others ignore it
        assert isinstance(method, cls) and method.calibration == cls.default_calibration
        assert make_method(name, {name: Calibration(2.0, -1.0)}, PROBE).calibration == Calibration(2.0, -1.0)
        specs = method.prompts(item())
        assert specs and all(isinstance(spec, PromptSpec) and spec.choices for spec in specs)
        assert not specs[-1].content_free   # the last prompt is over the trajectory's own evidence
    assert {DEFAULT_METHOD, DEFAULT_HTTP_METHOD, REASONING_METHOD} <= set(METHOD_NAMES)
    assert METHOD_CLASSES[DEFAULT_HTTP_METHOD].over_http
    # every over-HTTP method asks one prompt with no lead-in (what a chat server can answer)
    for name in OVER_HTTP:
        spec, = make_method(name).prompts(item())
        assert not spec.lead_in and not spec.content_free


def test_the_head_method_needs_a_head_and_reads_its_layers_from_the_choice_prompt():
    with pytest.raises(ValueError, match="method 'head' needs a verdict head"):
        make_method("head")
    spec, = make_method("head", head=HeadProbe((3, 5))).prompts(item())
    assert spec.hidden_layers == (3, 5) and spec == make_method("choice").prompts(item())[0].__class__(
        **{**spec.__dict__, "hidden_layers": (3, 5)})
    assert [s.hidden_layers for s in make_method("choice").prompts(item())] == [()]


def test_an_unknown_method_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="method: expected one of " + ", ".join(METHOD_NAMES) + ", got 'vibes'"):
        make_method("vibes")
    with pytest.raises(ValueError, match="method: expected one of"):
        EmbeddedJudge(method="vibes")   # before any model is loaded
    with pytest.raises(ValueError, match="method: expected one of"):
        OpenAIJudge(base_url="http://127.0.0.1:9/v1", model="m", method="vibes")


def test_reasoned_mode_is_judged_by_the_reasoning_method_whatever_the_item_names():
    for name in METHOD_NAMES:
        assert method_name_for(item(method=name), "x") == name
        assert method_name_for(item(method=name, mode="reasoned"), "x") == REASONING_METHOD
    assert method_name_for(item(), "judge-default") == "judge-default"
    spec, = make_method(REASONING_METHOD).prompts(item(mode="reasoned", max_tokens=40))
    assert spec.reasoning is not None and spec.reasoning.max_tokens == 40


def test_the_rubric_method_field_and_its_schema_list_the_registry():
    from rubric_fakes import REPO
    from rubrics.schema_gen import build_schema

    for name in METHOD_NAMES:
        assert JudgeOptions(text="x", method=name).method == name
    with pytest.raises(ValidationError):
        JudgeOptions(text="x", method="vibes")
    description = JudgeOptions.model_fields["method"].description
    assert all(cls.description in description for cls in METHOD_CLASSES.values())

    def method_enums(node) -> list:
        found = []
        if isinstance(node, dict):
            if isinstance(node.get("method"), dict):
                found += [branch["enum"] for branch in node["method"].get("anyOf", []) if "enum" in branch]
            for value in node.values():
                found += method_enums(value)
        elif isinstance(node, list):
            for value in node:
                found += method_enums(value)
        return found

    generated = method_enums(build_schema("rubric"))
    committed = method_enums(json.loads((REPO / "schemas" / "rubric.schema.json").read_text()))
    # the rubric's judge defaults and an item's judge options
    assert len(generated) == 2 and all(enum == list(METHOD_NAMES) for enum in generated)
    assert committed == generated, "run: python -m rubrics.schema_gen"


def test_judge_eval_offers_every_registered_method():
    from rubrics.cli.main import build_parser

    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    method = next(a for a in subcommands["judge-eval"]._actions if a.dest == "method")
    assert tuple(method.choices) == METHOD_NAMES


@pytest.mark.parametrize("name", LOCAL_ONLY)
def test_the_openai_judge_refuses_a_method_a_chat_server_cannot_run(name):
    with pytest.raises(ValueError, match=f"method: {name!r} needs prompt log-probabilities, which "
                                         "OpenAI-compatible chat servers do not return"):
        OpenAIJudge(base_url="http://127.0.0.1:9/v1", model="m", method=name)


@pytest.mark.parametrize("name", OVER_HTTP)
def test_the_openai_judge_accepts_a_method_a_chat_server_can_run(name):
    judge = OpenAIJudge(base_url="http://127.0.0.1:9/v1", model="m", method=name,
                        calibrations={name: IDENTITY})
    assert judge.method == name and judge.methods.named(name).calibration == IDENTITY


@pytest.mark.parametrize("name", LOCAL_ONLY)
def test_judge_eval_with_the_openai_judge_refuses_a_local_only_method(name, capsys):
    from rubrics.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["judge-eval", "labels.jsonl", "--rubric", "rubric.yaml", "--judge", "openai",
              "--base-url", "http://127.0.0.1:9/v1", "--method", name])
    assert exit_.value.code == 2
    assert f"--judge openai: method: {name!r} needs prompt log-probabilities" in capsys.readouterr().err


# -------------------------------------------------------------------- a method added to the registry


class ShoutMethod(JudgeMethod):
    """A stand-in for a new method file: one prompt, two one-token answers, raw score = their difference."""

    name = "shout"
    layout_version = "2030-01-01.1"
    over_http = False
    description = "shout: a test method"

    def prompts(self, item: JudgeItem) -> list[PromptSpec]:
        return [PromptSpec("Answer LOUD or QUIET.", (Piece("\n" + item.criterion),), (Piece("LOUD"), Piece("QUIET")))]

    def raw_score(self, item: JudgeItem, scored: list[ScoredPrompt]) -> float:
        loud, quiet = scored[0].logprobs
        return loud - quiet


class StubLLM:
    """What the embedded judge needs of an engine: a tokenizer, a context length, and score_with_usage()."""

    def __init__(self, tokenizer):
        from judge_engine.loading.weights import resolve_model_path

        self.tokenizer = tokenizer
        self.model_path = resolve_model_path(None)   # it stands for the embedded model: its identity and calibration
        self.max_seq_len = 8192
        self.scored: list[tuple[list[int], list[list[int]]]] = []

    def stats(self) -> dict:
        return {}

    def score_with_usage(self, prompts, choices, on_scored=None):
        from judge_engine import Scored, TokenUsage

        self.scored += list(zip(prompts, choices))
        for index in range(len(prompts)):
            if on_scored is not None:
                on_scored(index)
        return [Scored([-0.5, -2.5], TokenUsage(len(prompt))) for prompt in prompts]


def test_a_method_added_to_the_registry_is_run_by_the_embedded_judge_and_checked_by_the_openai_judge(monkeypatch):
    from judge_models import embedded_tokenizer

    monkeypatch.setitem(METHOD_CLASSES, ShoutMethod.name, ShoutMethod)
    llm = StubLLM(embedded_tokenizer())
    judge = EmbeddedJudge(method="shout", llm=llm, calibrations={"shout": Calibration(1.0, -2.0)})
    context = JudgeContext("t", "Write it.", None, (EvidenceBlock("final_answer", "done"),))
    by_default, by_item = judge.judge([JudgeRequest(context, item()),
                                       JudgeRequest(context, item(id="b", method="shout", threshold=0.6))])
    # raw = -0.5 - -2.5 = 2.0; calibrated: sigmoid(1.0 * 2.0 - 2.0) = 0.5
    assert by_default.error is None and by_default.probability == pytest.approx(0.5) and by_default.met is True
    assert by_item.probability == pytest.approx(0.5) and by_item.met is False
    prompt, choices = llm.scored[0]
    assert "Answer LOUD or QUIET." in llm.tokenizer.decode(prompt)
    assert [llm.tokenizer.decode(c) for c in choices] == ["LOUD", "QUIET"]
    # the OpenAI judge knows it too, and refuses it since it is not over_http
    with pytest.raises(ValueError, match="'shout' needs prompt log-probabilities"):
        OpenAIJudge(base_url="http://127.0.0.1:9/v1", model="m", method="shout")
    monkeypatch.setattr(ShoutMethod, "over_http", True)
    assert OpenAIJudge(base_url="http://127.0.0.1:9/v1", model="m", method="shout").method == "shout"


def test_a_request_naming_an_unregistered_method_gets_its_own_error_from_the_embedded_judge():
    from judge_models import embedded_tokenizer

    judge = EmbeddedJudge(method="choice", llm=StubLLM(embedded_tokenizer()))
    context = JudgeContext("t", "Write it.", None, (EvidenceBlock("final_answer", "done"),))
    bad, good = judge.judge([JudgeRequest(context, item(method="vibes")), JudgeRequest(context, item(id="b"))])
    assert bad.met is None and "method: expected one of" in bad.error and "'vibes'" in bad.error
    shipped = shipped_calibration(judge.identity()).calibrations["choice"]
    assert judge.methods.named("choice").calibration == shipped != IDENTITY
    assert good.error is None and good.probability == pytest.approx(shipped.probability(2.0))
