import json

import jsonschema
import pytest
import yaml
from rubric_fakes import EXAMPLE_DIR, EXAMPLE_RUBRIC, REPO, ScriptedJudge

import rubrics
from rubrics.schema_gen import NAMES, build_schema, dumps, main

SCHEMAS = REPO / "schemas"


def validator(name: str):
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("name", NAMES)
def test_committed_schemas_match_the_models(name):
    committed = (SCHEMAS / f"{name}.schema.json").read_text()
    assert committed == dumps(build_schema(name)), "run: python -m rubrics.schema_gen"


def test_schema_gen_check_mode(tmp_path):
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "result.schema.json").write_text("{}")
    assert main(["--out", str(tmp_path), "--check"]) == 1


def test_example_modeline_points_at_the_rubric_schema():
    first = EXAMPLE_RUBRIC.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/rubric.schema.json"
    assert (EXAMPLE_RUBRIC.parent / "../../schemas/rubric.schema.json").resolve() == SCHEMAS / "rubric.schema.json"


def test_rubric_schema_accepts_the_example():
    assert list(validator("rubric").iter_errors(yaml.safe_load(EXAMPLE_RUBRIC.read_text()))) == []


def test_rubric_schema_accepts_every_check_key_and_judge_option():
    doc = {"version": 1, "id": "all", "task": "t",
           "judge": {"evidence": ["final_answer"], "method": "choice", "mode": "reasoned", "max_tokens": 64,
                     "threshold": 0.6},
           "gates": [{"id": "g", "tests": {"fail_to_pass": ["a"], "pass_to_pass": ["b"]}}],
           "criteria": [
               {"id": "j", "points": 1, "judge": {"text": "x", "method": "likelihood", "parts": ["y", "z"]},
                "evidence": ["transcript"],
                "threshold": 0.7, "examples": [{"evidence": "e", "met": True}]},
               {"id": "e", "points": 1, "email_sent": {"to": ["a@b.c"], "cc": "c@d.e", "subject": "*", "body": "x",
                                                        "attachment": "*.pdf", "to_other_than": ["a@b.c"]}},
               {"id": "n", "points": 1, "number": {"in": "final_answer", "pattern": "(\\d+)", "expected": 5,
                                                    "tolerance": "1%"}},
               {"id": "c", "points": 1, "contains": {"text": ["a", "b"], "all": False, "case_sensitive": True}},
               {"id": "r", "points": 1, "regex": {"in": "transcript", "pattern": "a+"}},
               {"id": "t", "points": 1, "tool_called": {"name": "send_*", "args": {"to": "a"}, "min": 1, "max": 2}},
               {"id": "f", "points": 1, "file": {"path": "*.md", "exists": True, "contains": "x"}},
               {"id": "js", "points": 1, "json": {"in": "files.a.json", "path": "a[0].b", "equals": 1}},
               {"id": "a", "points": 1, "all_of": [{"contains": {"text": "a"}}, {"not": {"regex": {"pattern": "b"}}}]},
               {"id": "o", "points": -1, "any_of": [{"file": {"path": "x", "exists": False}}]},
           ]}
    assert [e.message for e in validator("rubric").iter_errors(doc)] == []
    assert rubrics.load_rubric(doc).total == 9   # the loader agrees


BASE = {"version": 1, "id": "r", "task": "t"}


@pytest.mark.parametrize("bad", [
    {**BASE, "criteria": [{"id": "c", "points": 1}]},                                           # no check key
    {**BASE, "criteria": [{"id": "c", "points": 1, "contains": {"text": "a"}, "regex": {"pattern": "a"}}]},
    {**BASE, "criteria": [{"id": "c", "points": 0, "contains": {"text": "a"}}]},                # zero points
    {**BASE, "criteria": [{"id": "c", "contains": {"text": "a"}}]},                             # no points
    {**BASE, "gates": [{"id": "g", "points": 2, "contains": {"text": "a"}}]},                   # gate with points
    {**BASE, "criteria": [{"id": "c", "points": 1, "emial_sent": {"to": "a@b.c"}}]},            # unknown key
    {**BASE, "criteria": [{"id": "c", "points": 1, "contains": {"txt": "a"}}]},                 # unknown check field
    {**BASE, "criteria": [{"id": "c", "points": 1, "judge": {"text": "x", "mode": "fast"}}]},
    {**BASE, "criteria": [{"id": "has space", "points": 1, "judge": "x"}]},
    {**BASE, "criteria": [{"id": "c", "points": 1, "all_of": [{"contains": {"text": "a"}, "regex": {"pattern": "a"}}]}]},
    {**BASE, "version": 2, "criteria": [{"id": "c", "points": 1, "judge": "x"}]},
    {"version": 1, "id": "r", "criteria": [{"id": "c", "points": 1, "judge": "x"}]},             # no task
])
def test_rubric_schema_rejects_bad_items(bad):
    assert list(validator("rubric").iter_errors(bad)), "the schema accepted an invalid rubric"
    with pytest.raises(rubrics.RubricError):
        rubrics.load_rubric(bad)   # and so does the loader


def test_trajectory_schema_accepts_the_example_trajectories():
    check = validator("trajectory")
    for path in sorted((EXAMPLE_DIR / "trajectories").glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            assert list(check.iter_errors(data)) == [], path
    assert list(check.iter_errors({"id": "x", "messages": "not a list"}))


def test_result_schema_accepts_results():
    results = rubrics.score_many(sorted((EXAMPLE_DIR / "trajectories").glob("*.json")), EXAMPLE_RUBRIC,
                                 judge=ScriptedJudge())
    check = validator("result")
    for result in results:
        assert list(check.iter_errors(result.to_dict())) == []
