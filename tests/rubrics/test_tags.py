"""Item tags: per-tag scores on each result, in the schema, and in the CLI table."""
import json
import os
import subprocess
import sys

import jsonschema
import pytest
import yaml
from rubric_fakes import REPO, ScriptedJudge, trajectory, yaml_text

import rubrics
from rubrics.judges import Verdict

RUBRIC = yaml_text("""
    version: 1
    id: tagged
    task: answer the patient
    gates:
      - {id: polite, contains: {text: hello}, tags: [axis:communication]}
    criteria:
      - {id: dose, points: 5, contains: {text: 5 mg}, tags: [axis:accuracy, level:example]}
      - {id: refer, points: 3, judge: refers to a doctor, tags: [axis:completeness, level:example]}
      - {id: wrong, points: -4, contains: {text: 50 mg}, tags: [axis:accuracy]}
      - {id: warns, points: 2, judge: warns about side effects, tags: [axis:completeness]}
      - {id: scary, points: -2, judge: is alarmist, tags: [axis:communication]}
""")


def judge_says(met_ids):
    return ScriptedJudge(lambda r: Verdict(met=r.item.id in met_ids, probability=0.9 if r.item.id in met_ids else 0.1))


def test_each_tag_scores_its_own_criteria():
    result = rubrics.score(trajectory("hello, take 5 mg, not 50 mg"), RUBRIC, judge=judge_says({"refer"}))
    tags = {tag: (s.earned, s.total, s.score, s.complete) for tag, s in result.tags.items()}
    assert list(result.tags) == sorted(result.tags)
    assert tags == {
        "axis:accuracy": (5 - 4, 5, 1 / 5, True),
        "axis:completeness": (3, 5, 3 / 5, True),
        "axis:communication": (0, 0, None, True),   # a gate and a penalty: no positive points
        "level:example": (8, 8, 1.0, True),
    }
    assert [i.tags for i in result.items][:2] == [["axis:communication"], ["axis:accuracy", "level:example"]]
    jsonschema.validate(result.to_dict(), json.loads((REPO / "schemas" / "result.schema.json").read_text()))
    jsonschema.validate(yaml.safe_load(RUBRIC), json.loads((REPO / "schemas" / "rubric.schema.json").read_text()))


def test_a_tag_with_an_item_in_error_is_incomplete_and_untagged_rubrics_have_none():
    broken = ScriptedJudge(lambda r: Verdict(met=None, probability=None, error="down"))
    result = rubrics.score(trajectory("hello 5 mg"), RUBRIC, judge=broken)
    assert result.tags["axis:accuracy"].complete and not result.tags["axis:completeness"].complete
    plain = rubrics.score(trajectory("x"), "version: 1\nid: p\ntask: t\ncriteria:\n  - {id: a, points: 1, "
                                           "contains: {text: x}}\n")
    assert plain.tags == {} and plain.items[0].tags == []


@pytest.mark.parametrize("tags, message", [("axis:accuracy", "valid list"), (["has space"], "pattern"),
                                           ([f"t{i}" for i in range(33)], "at most 32")])
def test_bad_tags_are_rubric_errors_with_their_line(tags, message):
    text = yaml.safe_dump({"version": 1, "id": "r", "task": "t",
                           "criteria": [{"id": "a", "points": 1, "contains": {"text": "x"}, "tags": tags}]})
    with pytest.raises(rubrics.RubricError) as caught:
        rubrics.load_rubric(text)
    assert "criteria[0].tags" in str(caught.value) and message in str(caught.value)


def test_the_table_shows_per_tag_means_and_verbose_rows(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(RUBRIC.replace("judge: refers to a doctor", "contains: {text: doctor}")
                    .replace("judge: warns about side effects", "contains: {text: drowsy}")
                    .replace("judge: is alarmist", "contains: {text: emergency}"))
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(trajectory("hello 5 mg, see a doctor", id="a")) + "\n"
                    + json.dumps(trajectory("hello 50 mg, may make you drowsy", id="b")) + "\n")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "grade", path, runs, "--verbose"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    table = lines[lines.index(next(l for l in lines if l.startswith("tag "))):]
    assert [l.split() for l in table] == [["tag", "mean", "score", "results"],
                                          ["axis:accuracy", "0.500", "2"],        # a: 5/5, b: max(0, -4)/5
                                          ["axis:completeness", "0.500", "2"],    # a: 3/5, b: 2/5
                                          ["level:example", "0.500", "2"]]        # a: 8/8, b: 0/8
    assert any(l.split()[:3] == ["#axis:accuracy", "1.000", "5/5"] for l in lines)
