"""Hostile input is normal input: alias bombs, catastrophic regexes, prose that YAML misreads, huge rubrics."""
from __future__ import annotations

import cProfile
import pstats
import subprocess
import sys
import time

import pytest

import rubrics
from rubrics.rubric import source_map
from rubrics.checks import patterns
from rubrics.cli.main import main
from rubrics.rubric.lint import lint_file
from rubrics.rubric.load import analyze_rubric
from rubrics.rubric.source_map import parse_yaml
from rubrics.rubric.problems import RubricError

HEAD = "version: 1\nid: r\ntask: t\n"
OK_CRITERION = "  - {id: ok, points: 1, contains: {text: x}}\n"


def bomb() -> str:
    """The 'billion laughs' pattern: nine lists of nine aliases of the list before, about 400 bytes."""
    lines = [HEAD.rstrip("\n"), 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join(["*" + previous] * 9) + "]")
        previous = name
    lines.append("criteria:")
    return "\n".join(lines) + "\n" + OK_CRITERION


# ------------------------------------------------------------------------------------------ alias bombs

LOADERS = [source_map.PythonPositionLoader] + ([source_map.PositionLoader] if source_map.CParser is not None else [])


@pytest.mark.parametrize("loader", LOADERS, ids=lambda cls: cls.__mro__[3].__name__)
def test_an_alias_bomb_is_rejected_at_once_naming_the_file_and_the_alias_line(tmp_path, monkeypatch, loader):
    monkeypatch.setattr(source_map, "PositionLoader", loader)
    path = tmp_path / "rubric.yaml"
    path.write_text(bomb())
    assert len(bomb()) < 450
    started = time.perf_counter()
    with pytest.raises(RubricError) as info:
        rubrics.load_rubric(path)
    assert time.perf_counter() - started < 2
    (problem,) = info.value.problems
    # *e, the first alias of line 9, is the one that crosses the budget (5 * 9^4 + ... > 100,000 nodes)
    assert (problem.code, problem.line, problem.col) == ("yaml-syntax", 9, 8)
    assert str(info.value).startswith(f"{path}:9:8: error: alias '*e' expands the document past 100,000")


def test_rubric_lint_rejects_an_alias_bomb_in_a_subprocess(tmp_path):
    path = tmp_path / "bomb.rubric.yaml"
    path.write_text(bomb())
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "lint", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith(f"{path}:9:8: error: alias '*e' expands the document past")
    assert "[yaml-syntax]" in done.stdout


def test_ordinary_anchors_aliases_and_merge_keys_still_work():
    text = HEAD + ("defaults: &judged {evidence: [final_answer, emails], threshold: 0.7}\n"
                   "criteria:\n"
                   "  - {id: a, points: 1, judge: names both expenses, <<: *judged}\n"
                   "  - {id: b, points: 1, judge: explains the change, <<: *judged}\n"
                   "  - {id: c, points: 1, contains: &needles {text: [EXP-221, EXP-307]}}\n"
                   "  - {id: d, points: -1, not: {contains: *needles}}\n")
    data, _, problems = parse_yaml(text)
    assert problems == []
    assert data["criteria"][1]["threshold"] == 0.7 and data["criteria"][3]["not"]["contains"]["text"][1] == "EXP-307"


def test_many_small_aliases_in_a_large_rubric_stay_within_the_budget():
    items = "".join(f"  - {{id: c{i}, points: 1, contains: *needles}}\n" for i in range(3000))
    text = HEAD + "shared: &needles {text: [EXP-221, EXP-307, EXP-311, EXP-400]}\ncriteria:\n" + items
    data, _, problems = parse_yaml(text)
    assert problems == [] and len(data["criteria"]) == 3000   # 3000 aliases of 6 nodes: 18,000 < budget


# ------------------------------------------------------------------------------ prose that YAML misreads

QUOTE_HINT = "a colon followed by a space starts a key"
COMMA_HINT = "a comma ends a value inside {...}: quote the previous value"


@pytest.mark.parametrize("item, line, col", [
    ("  - {id: x, points: 1, judge: note: the reply is short}\n", 6, 35),
    ("  - id: x\n    points: 1\n    judge: the reply: short\n", 8, 21),
])
def test_a_colon_in_unquoted_judge_text_gets_a_quoting_hint(item, line, col):
    _, problems, _ = analyze_rubric(HEAD + "criteria:\n" + OK_CRITERION + item)
    (problem,) = problems
    assert (problem.code, problem.line, problem.col) == ("yaml-syntax", line, col)
    assert QUOTE_HINT in problem.message and '"the reply: short"' in problem.message


def test_a_syntax_error_elsewhere_gets_no_colon_hint():
    _, problems, _ = analyze_rubric(HEAD + "criteria: [\n")
    assert problems[0].code == "yaml-syntax" and QUOTE_HINT not in problems[0].message


@pytest.mark.parametrize("item, path", [
    ("- {id: c, points: 1, judge: {text: one page, readable by a CFO}}", "criteria[1].judge.readable by a CFO"),
    ("- {id: c, points: 1, file: {path: r.md, contains: Total, travel spend}}", "criteria[1].file.travel spend"),
    ("- {id: c, points: 1, any_of: [{contains: {text: one page, readable by a CFO}}]}",
     "criteria[1].any_of[0].contains.readable by a CFO"),
])
def test_the_comma_hint_is_given_inside_nested_flow_mappings(item, path):
    _, problems, _ = analyze_rubric(HEAD + "criteria:\n" + OK_CRITERION + f"  {item}\n")
    (problem,) = problems
    assert (problem.code, problem.path, problem.line) == ("unknown-key", path, 6)
    assert COMMA_HINT in problem.message


def test_no_comma_hint_for_a_plain_unknown_key():
    _, problems, _ = analyze_rubric(HEAD + "criteria:\n" + OK_CRITERION + "  - {id: c, points: 1, file: {path: a, contans: b}}\n")
    (problem,) = problems
    assert problem.code == "unknown-key" and "did you mean" in problem.message and COMMA_HINT not in problem.message


# ------------------------------------------------------------------------------------- catastrophic regexes

EVIL_TEXT = "a" * 34 + "!"
EVIL_RUBRIC = HEAD + """criteria:
  - {id: ok-before, points: 1, contains: {in: transcript, text: aaaa}}
  - {id: evil-regex, points: 1, regex: {in: transcript, pattern: 'PATTERN'}}
  - {id: evil-json, points: 1, json: {in: final_answer, path: note, matches: 'PATTERN'}}
  - {id: evil-number, points: 1, number: {in: transcript, pattern: '(\\d+)?PATTERN', expected: 5}}
  - {id: ok-after, points: 1, json: {in: final_answer, path: total, equals: 5}}
"""


def evil_trajectory(name: str) -> dict:
    answer = '{"note": "%s", "total": 5}' % EVIL_TEXT
    return {"id": name, "messages": [{"role": "user", "content": EVIL_TEXT},
                                     {"role": "assistant", "content": EVIL_TEXT}], "final_answer": answer}


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|a)*$"])
def test_evil_patterns_finish_quickly_and_cost_only_their_own_items(monkeypatch, pattern):
    # The timeout counts CPU time; a shorter one keeps six timed-out searches quick on a loaded machine.
    monkeypatch.setattr(patterns, "MATCH_TIMEOUT_S", 0.25)
    rubric = rubrics.load_rubric(EVIL_RUBRIC.replace("PATTERN", pattern))
    started = time.perf_counter()
    results = rubrics.score_many([evil_trajectory("t1"), evil_trajectory("t2")], rubric, judge=rubrics.NoJudge())
    assert time.perf_counter() - started < 10
    for result in results:
        status = {item.id: item.status for item in result.items}
        assert status["ok-before"] == "met" and status["ok-after"] == "met"
        if pattern == "(a|a)*$":   # the regex package's own safeguards do not cover overlapping alternatives
            assert {status[k] for k in ("evil-regex", "evil-json", "evil-number")} == {"error"}
            errors = [e for e in result.errors if e.startswith("evil-")]
            assert len(errors) == 3 and all(pattern in e and "gave no answer within 0.25 s" in e for e in errors)
        else:
            assert status["evil-regex"] in ("unmet", "error")


def test_the_match_timeout_is_what_bounds_a_search(monkeypatch):
    monkeypatch.setattr(patterns, "MATCH_TIMEOUT_S", 0.05)
    compiled = patterns.compile_pattern("(a|a)*$", "pattern")
    started = time.perf_counter()
    with pytest.raises(rubrics.checks.CheckError, match=r"pattern: regex '\(a\|a\)\*\$' gave no answer within 0.05 s"):
        patterns.search(compiled, "a" * 60 + "!", "pattern")
    assert time.perf_counter() - started < 2


def test_rubric_patterns_keep_re_syntax():
    compiled = patterns.compile_pattern(r"(?i)(?<!\d)total:\s*(\d+)\b(?=\.)", "pattern")
    assert patterns.search(compiled, "Sub-TOTAL: 41.", "pattern").group(1) == "41"
    with pytest.raises(rubrics.checks.CheckError, match="invalid regex"):
        patterns.compile_pattern("(unclosed", "pattern")


@pytest.mark.parametrize("pattern, warned", [
    ("(a+)+", True), ("(a*)*", True), ("(a|a)*", True), (r"(\w+\s?)+$", True), (r"(\s|\n)*x", True),
    ("(?i)(A|a)+", True), (r"(\d{1,3})+x", True),
    (r"EXP-\d{3}", False), (r"(\d+,)+", False), (r"(\w+\s)+", False), ("(?:foo|bar)*", False),
    ("(?>a+)+", False), ("(a++)+", False), ("(ba+)*a", False), (r"[\w_]+", False), (r"(?:\(|\))*", False),
])
def test_nested_quantifier_detection(pattern, warned):
    assert patterns.nested_quantifier(pattern) is warned


@pytest.mark.parametrize("check", [
    "regex: {in: transcript, pattern: '(a+)+$'}",
    "json: {path: a, matches: '(a|a)*'}",
    "number: {pattern: '(\\d+)(\\s*\\d*)*$', expected: 5}",
])
def test_lint_warns_on_nested_quantifiers_at_the_pattern_line(tmp_path, check):
    path = tmp_path / "rubric.yaml"
    path.write_text(HEAD + "criteria:\n" + OK_CRITERION + "  - id: c\n    points: 1\n    " + check + "\n")
    (problem,) = lint_file(path)
    assert (problem.code, problem.severity, problem.line) == ("nested-quantifier", "warning", 8)
    assert "backtracks exponentially" in problem.message


# ---------------------------------------------------------------------------------------- large rubrics

def big_rubric(n: int) -> str:
    kinds = [
        "  - {{id: c{i}, points: 1, judge: flags expense {i} approved without sign-off}}\n",
        "  - {{id: c{i}, points: 2, contains: {{in: transcript, text: [EXP-{i}, total]}}}}\n",
        "  - {{id: c{i}, points: 1, regex: {{pattern: 'EXP-\\d{{3}}'}}}}\n",
        "  - {{id: c{i}, points: 1, number: {{label: total {i}, expected: 48.2L, tolerance: 0.5%}}}}\n",
        "  - id: c{i}\n    points: -1\n    email_sent: {{to_other_than: [cfo@acme.test]}}\n",
        "  - {{id: c{i}, points: 1, json: {{in: files.out.json, path: 'a.b[0]', matches: ok}}}}\n",
    ]
    return HEAD + "criteria:\n" + "".join(kinds[i % len(kinds)].format(i=i) for i in range(n))


def calls_to_lint(tmp_path, n: int) -> int:
    path = tmp_path / f"rubric{n}.yaml"
    path.write_text(big_rubric(n))
    assert lint_file(path) == []
    profile = cProfile.Profile()
    profile.enable()
    lint_file(path)
    profile.disable()
    return pstats.Stats(profile).total_calls


def test_lint_work_grows_linearly_with_the_number_of_criteria(tmp_path):
    """Counted in Python function calls, not seconds, so that a busy machine cannot make it flaky."""
    small, large = calls_to_lint(tmp_path, 1000), calls_to_lint(tmp_path, 4000)
    assert large / small < 4.4   # 4x the criteria: 4x the work, not 16x
    if source_map.CParser is not None:   # libyaml scans: ~1,430 calls per item; PyYAML in Python made ~1,880
        assert large / 4000 < 1700


# ------------------------------------------------------------------------------------------ CLI help

@pytest.mark.parametrize("command", ["pass-rates", "calibrate"])   # calibrate: its deprecated old name
def test_pass_rates_help_shows_single_percent_signs(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "inspect at 0%, drop at 100%, keep" in out and "%%" not in out
