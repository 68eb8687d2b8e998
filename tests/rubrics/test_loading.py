from pathlib import Path

import pytest
from rubric_fakes import EXAMPLE_RUBRIC, yaml_text

import rubrics
from rubrics.rubric.load import analyze_rubric
from rubrics.rubric.source_map import parse_yaml
from rubrics.rubric.spec import Rubric
from rubrics.rubric.problems import RubricError

GOOD = yaml_text("""
    version: 1
    id: r
    task: do the thing
    criteria:
      - id: c1
        points: 2
        contains: {text: done}
""")


def test_positions_of_values_and_keys():
    data, smap, problems = parse_yaml("a: 1\nb:\n  - {x: 2}\n  - y\n")
    assert problems == []
    assert data == {"a": 1, "b": [{"x": 2}, "y"]}
    assert smap.values[("a",)] == (1, 4)
    assert smap.values[("b", 0, "x")] == (3, 9)
    assert smap.keys[("b", 0, "x")] == (3, 6)
    assert smap.values[("b", 1)] == (4, 5)
    # a path without its own position falls back to the nearest ancestor
    assert smap.locate(("b", 0, "missing")) == (3, 5)


def test_duplicate_key_is_reported_at_the_second_key():
    _, _, problems = parse_yaml("a: 1\nb: 2\na: 3\n")
    assert [(p.code, p.line, p.col, p.path) for p in problems] == [("duplicate-key", 3, 1, "a")]


@pytest.mark.parametrize("text, line", [("a: [1\n", 2), ("a: b\n c: d\n", 2), ("- a\nb: c\n", 2)])
def test_syntax_errors_have_a_position(text, line):
    data, _, problems = parse_yaml(text)
    assert data is None
    assert problems[0].code == "yaml-syntax" and problems[0].line == line


def test_recursive_alias_and_unsafe_tags_are_problems_not_crashes():
    _, _, problems = parse_yaml("a: &x [*x]\n")
    assert problems[0].code == "yaml-syntax" and "recursive" in problems[0].message
    data, _, problems = parse_yaml("a: !!python/object/apply:os.system [echo hi]\n")
    assert data == {"a": None} and "unsupported YAML tag" in problems[0].message
    data, _, problems = parse_yaml("a: !!python/name:os.system x\n")
    assert data is None and "constructor" in problems[0].message
    _, _, problems = parse_yaml("a: !!set {x: null}\n")
    assert problems[0].code == "yaml-syntax"


def test_merge_keys_and_aliases_resolve():
    data, _, problems = parse_yaml("base: &b {p: 1}\nc: {<<: *b, q: 2}\n")
    assert problems == [] and data["c"] == {"p": 1, "q": 2}


def test_empty_document():
    _, _, problems = parse_yaml("")
    assert problems[0].code == "yaml-syntax" and "empty" in problems[0].message
    _, problems, _ = analyze_rubric("~\n# nothing\n")
    assert problems[0].code == "schema"


def test_load_rubric_accepts_path_str_path_text_dict_and_rubric(tmp_path):
    from_path = rubrics.load_rubric(EXAMPLE_RUBRIC)
    assert from_path.source == str(EXAMPLE_RUBRIC)
    assert rubrics.load_rubric(str(EXAMPLE_RUBRIC)).id == "q3-travel-mis"
    assert rubrics.load_rubric(GOOD).criteria[0].id == "c1"
    import yaml
    assert rubrics.load_rubric(yaml.safe_load(GOOD)).criteria[0].config == {"text": "done"}
    assert rubrics.load_rubric(from_path) is from_path
    assert isinstance(from_path, Rubric) and from_path.total == 8


def test_rubric_error_lists_every_error_with_file_line_col_and_field(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(GOOD.replace("points: 2", "points: 0").replace("id: c1", "id: c1\n    text: 3"))
    with pytest.raises(RubricError) as info:
        rubrics.load_rubric(path)
    lines = str(info.value).splitlines()
    assert any(line.startswith(f"{path}:7:13: error: criteria[0].points:") and "[zero-points]" in line for line in lines)
    assert any(line.startswith(f"{path}:6:11: error: criteria[0].text:") and "[schema]" in line for line in lines)
    assert {p.code for p in info.value.problems} >= {"zero-points", "schema", "no-positive-points"}


def test_missing_file_and_wrong_type():
    with pytest.raises(RubricError, match="io-error"):
        rubrics.load_rubric(Path("/nonexistent/rubric.yaml"))
    with pytest.raises(TypeError):
        rubrics.load_rubric(42)


def test_warnings_do_not_block_loading():
    text = GOOD + "  - {id: p, points: -1, judge: never makes up numbers}\n"
    rubric, problems, _ = analyze_rubric(text)
    assert rubric is not None and [p.code for p in problems] == ["sign-mismatch"]


def test_control_characters_are_a_positioned_problem():
    data, _, problems = parse_yaml("a: 1\nb: \x1f\n")
    assert data is None and (problems[0].line, problems[0].col) == (2, 4) and "U+001F" in problems[0].message


def test_an_unreadable_scalar_is_an_error_at_its_own_line():
    _, problems, _ = analyze_rubric("version: 1\nid: r\ntask: 2024-13-45\ncriteria:\n  - {id: c, points: 1, contains: {text: x}}\n")
    (problem,) = problems
    assert (problem.code, problem.path, problem.line, problem.col) == ("yaml-syntax", "task", 3, 7)
    assert "'2024-13-45': month must be in 1..12; quote it" in problem.message


def test_a_byte_that_is_not_utf8_is_an_error_at_its_line(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_bytes(b"version: 1\nid: r\ntask: caf\xc3\xa9 \xff\ncriteria: []\n")
    _, problems, _ = analyze_rubric(path)
    (problem,) = problems
    assert (problem.code, problem.line, problem.col) == ("io-error", 3, 12)
    assert "byte 0xff is not UTF-8" in problem.message


def test_an_over_long_integer_is_an_error_at_its_line_and_quoted_short():
    text = ("version: 1\nid: r\ntask: t\ncriteria:\n  - {id: c, points: 1, contains: {text: x}}\n"
            "  - {id: d, points: " + "9" * 5000 + ", contains: {text: y}}\n")
    _, problems, _ = analyze_rubric(text)
    unreadable = [p for p in problems if p.code == "yaml-syntax"]
    assert unreadable and all((p.line, p.col) == (6, 21) for p in problems)
    assert "(5000 characters)" in unreadable[0].message and len(unreadable[0].message) < 400


@pytest.mark.parametrize("opening, closing", [("[", "]"), ("{a: ", "}")])
def test_nesting_deeper_than_5000_levels_is_an_error_at_its_line(opening, closing):
    text = ("version: 1\nid: r\ntask: t\ncriteria:\n  - {id: c, points: 1, contains: {text: x}}\n"
            "reference: " + opening * 6000 + "1" + closing * 6000 + "\n")
    _, problems, _ = analyze_rubric(text)
    assert problems and problems[0].code == "yaml-syntax" and problems[0].line == 6
