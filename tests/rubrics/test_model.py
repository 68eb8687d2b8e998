import pytest
from pydantic import ValidationError
from rubric_fakes import EXAMPLE_RUBRIC

import rubrics
from rubrics.rubric.spec import ItemFields, JudgeDefaults, JudgeOptions, RubricHeader


def test_example_rubric_model():
    rubric = rubrics.load_rubric(EXAMPLE_RUBRIC)
    assert [g.id for g in rubric.gates] == ["mis-to-cfo", "total-spend"]
    assert [c.points for c in rubric.criteria] == [3, 2, 2, 1, -3, -2]
    assert rubric.total == 8   # the sum of the positive points only
    untraceable = rubric.criteria[4]
    assert untraceable.is_judge and untraceable.penalty and untraceable.label.startswith("states any number")
    assert rubric.criteria[3].config == JudgeOptions(text="one page, readable by a CFO")
    gate = rubric.gates[0]
    assert gate.kind == "gate" and gate.check == "email_sent" and not gate.penalty
    assert gate.config == {"to": "cfo@acme.test", "attachment": "*MIS*"}
    assert rubric.judge == JudgeDefaults(evidence=["final_answer", "emails"])


@pytest.mark.parametrize("fields", [
    {"id": "has space"}, {"id": "a::b"}, {"id": "ok", "points": 1.5}, {"id": "ok", "points": True},
    {"id": "ok", "threshold": 1.0}, {"id": "ok", "threshold": 0}, {"id": "ok", "examples": [{"evidence": "x"}]},
])
def test_item_fields_reject(fields):
    with pytest.raises(ValidationError):
        ItemFields.model_validate(fields)


def test_judge_options():
    assert JudgeOptions(text="x", method="likelihood", mode="reasoned", max_tokens=64, threshold=0.7).mode == "reasoned"
    for bad in ({"text": ""}, {"text": "x", "method": "vote"}, {"text": "x", "max_tokens": 0}, {"text": "x", "extra": 1}):
        with pytest.raises(ValidationError):
            JudgeOptions.model_validate(bad)


def test_header_requires_version_1_and_task():
    with pytest.raises(ValidationError):
        RubricHeader.model_validate({"version": 2, "id": "r", "task": "t"})
    with pytest.raises(ValidationError):
        RubricHeader.model_validate({"version": 1, "id": "r"})
    assert RubricHeader.model_validate({"version": 1, "id": "r", "task": "t"}).gates == []


def test_public_api_is_lazy_and_complete():
    import subprocess
    import sys

    code = ("import sys, rubrics; light = not any(m.split('.')[0] in ('pydantic', 'yaml', 'torch', 'httpx') "
            "for m in sys.modules); names = [n for n in ('load_rubric', 'load_trajectory', 'score', 'score_many', "
            "'Result', 'RubricError', 'NoJudge') if callable(getattr(rubrics, n))]; print(light, len(names))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "7"], done.stderr
    assert callable(rubrics.OpenAIJudge) and callable(rubrics.EmbeddedJudge)
    with pytest.raises(AttributeError):
        rubrics.no_such_name
