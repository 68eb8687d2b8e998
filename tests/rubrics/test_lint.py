"""Every lint code, with where it points. The catalogue in rubrics.rubric.lint must match what the code emits."""
import re
from pathlib import Path

import pytest
from rubric_fakes import EXAMPLE_RUBRIC, yaml_text

import rubrics
from rubrics.cli.main import main
from rubrics.rubric.lint import LINT_CODES, lint_file

HEAD = "version: 1\nid: r\ntask: t\n"
OK_CRITERION = "  - {id: ok, points: 1, contains: {text: x}}\n"


def crit(*lines: str) -> str:
    """A rubric whose criteria are OK_CRITERION followed by the given item lines."""
    return HEAD + "criteria:\n" + OK_CRITERION + "".join(f"  {line}\n" for line in lines)


# (code, rubric text, (line, the text the problem must point at), severity, text expected in the message)
CASES = [
    ("file-outside", HEAD + "judge: {calibration: /etc/hostname}\ncriteria:\n" + OK_CRITERION, (4, "/etc/hostname"),
     "error", "outside the rubric's folder"),
    ("yaml-syntax", HEAD + "criteria: [\n", (5, ""), "error", "expected"),
    ("yaml-syntax", HEAD + "x: !!set {a: null}\n" + "criteria:\n" + OK_CRITERION, (4, "!!set"), "error", "unsupported YAML tag"),
    ("duplicate-key", HEAD + "task: u\ncriteria:\n" + OK_CRITERION, (4, "task"), "error", "duplicate key 'task'"),
    ("schema", "version: 2\nid: r\ntask: t\ncriteria:\n" + OK_CRITERION, (1, "2"), "error", "version"),
    ("schema", crit("- {id: c, points: 1.5, contains: {text: x}}"), (6, "1.5"), "error", "integer"),
    ("schema", crit("- {id: c, points: 1, judge: {text: x, mode: fast}}"), (6, "fast"), "error", "'direct' or 'reasoned'"),
    ("schema", crit("- {id: c, points: 1, number: {label: x}}"), (6, "{label"), "error", "missing required field 'expected'"),
    ("schema", crit("- {id: c, points: 1, contains: {text: 5}}"), (6, "5}"), "error",
     "Input should be a valid string or a valid list (got 5)"),
    ("schema", crit("- {id: c, points: 1, number: {expected: 5}}"), (6, "{expected"), "error",
     "exactly one of `label` or `pattern`"),
    ("unknown-key", "version: 1\nid: r\ntsk: t\ncriteria:\n" + OK_CRITERION, (3, "tsk"), "error", "did you mean 'task'"),
    ("unknown-key", crit("- {id: c, points: 1, emial_sent: {to: a@b.c}}"), (6, "emial_sent"), "error", "did you mean 'email_sent'"),
    ("unknown-key", crit("- {id: c, points: 1, contains: {txt: x}}"), (6, "txt"), "error", "did you mean 'text'"),
    ("unknown-key", crit("- {id: c, points: 1, all_of: [{regexx: {pattern: a}}]}"), (6, "regexx"), "error", "did you mean 'regex'"),
    ("unknown-key", crit("- {id: c, points: 1, contains: {inn: final_answer, text: a}}"), (6, "inn"), "error", "did you mean 'in'"),
    ("unknown-key", crit("- {id: c, points: 1, contains: {In: final_answer, text: a}}"), (6, "In"), "error", "did you mean 'in'"),
    ("unknown-key", crit("- {id: c, points: 1, contains: {text: a, case: true}}"), (6, "case"), "error",
     "did you mean 'case_sensitive'"),
    ("unknown-key", crit("- {id: c, points: 1, judge: one page, readable by a CFO}"), (6, "readable"), "error", "quote the previous value"),
    ("missing-check", crit("- {id: c, points: 1, text: no check}"), (6, "{id"), "error", "no check key"),
    ("multiple-checks", crit("- {id: c, points: 1, contains: {text: a}, regex: {pattern: a}}"), (6, "regex"), "error", "2 check keys"),
    ("missing-points", crit("- {id: c, contains: {text: a}}"), (6, "{id"), "error", "needs integer points"),
    ("duplicate-id", crit("- {id: ok, points: 1, contains: {text: y}}"), (6, "ok"), "error", "first used at criteria[0]"),
    ("gate-points", HEAD + "gates:\n  - {id: g, points: 2, contains: {text: a}}\ncriteria:\n" + OK_CRITERION,
     (5, "points"), "error", "a gate has no points"),
    ("zero-points", crit("- {id: c, points: 0, contains: {text: a}}"), (6, "0"), "error", "must not be 0"),
    ("no-positive-points", HEAD + "criteria:\n  - {id: p, points: -1, contains: {text: a}}\n", (5, "- "), "error", "no criterion"),
    ("no-positive-points", HEAD + "gates:\n  - {id: g, contains: {text: a}}\n", (1, "version"), "error", "no criterion"),
    ("judge-option", crit("- {id: c, points: 1, contains: {text: a}, evidence: [transcript]}"), (6, "evidence"), "error", "judge items only"),
    ("judge-option", crit("- {id: c, points: 1, regex: {pattern: a}, examples: [{evidence: e, met: true}]}"), (6, "examples"),
     "error", "judge items only"),
    ("conflicting-option", crit("- {id: c, points: 1, judge: {text: x, threshold: 0.6}, threshold: 0.7}"), (6, "threshold: 0.7"),
     "error", "threshold is given twice"),
    ("unknown-selector", crit("- {id: c, points: 1, contains: {in: answer, text: a}}"), (6, "answer"), "error", "unknown selector 'answer'"),
    ("unknown-selector", crit("- {id: c, points: 1, contains: {in: finall_answer, text: a}}"), (6, "finall_answer"), "error",
     "did you mean 'final_answer'"),
    ("unknown-selector", crit("- {id: c, points: 1, judge: ok, evidence: [final_answer, emials]}"), (6, "emials"), "error",
     "did you mean 'emails'"),
    ("unknown-selector", HEAD + "judge: {evidence: [stat.x]}\ncriteria:\n" + OK_CRITERION, (4, "stat.x"), "error", "stat.x"),
    ("sign-mismatch", crit("- {id: c, points: -2, judge: never invents numbers}"), (6, "-2"), "warning", "phrased as a reward"),
    ("sign-mismatch", crit("- {id: c, points: 2, text: fails to cite the source, judge: x}"), (6, "2"), "warning",
     "phrased as a failure"),
    ("facts-suggested", crit("- {id: c, points: 2, judge: refunds $42 to ana@x.test under RMA-7731}"), (6, "refunds"),
     "warning", "depends on $42 (an amount), ana@x.test (an address), RMA-7731 (an id), named in its text: did you "
                'mean judge: {text: ..., facts: ["$42", ana@x.test, RMA-7731]}?'),
    ("facts-suggested", "version: 1\nid: r\ntask: t\nreference: EXP-221 and EXP-307 were approved without sign-off."
     "\ncriteria:\n" + OK_CRITERION + "  - {id: c, points: 3, judge: flags the 2 expenses approved without sign-off}\n",
     (7, "flags"), "warning", "EXP-221 (an id), EXP-307 (an id), named in the reference, beside its words"),
    ("invalid-regex", crit("- {id: c, points: 1, regex: {pattern: '(unclosed'}}"), (6, "'(unclosed"), "error", "invalid regex"),
    ("invalid-regex", crit("- {id: c, points: 1, not: {json: {in: files.a.json, path: a, matches: '['}}}"), (6, "'['"),
     "error", "invalid regex"),
    ("invalid-glob", crit("- {id: c, points: 1, email_sent: {to: a@b.c, attachment: '[MIS'}}"), (6, "'[MIS"), "error",
     "invalid glob"),
    ("invalid-glob", crit("- {id: c, points: 1, file: {path: 'reports/[abc.md'}}"), (6, "'reports"), "error", "unclosed '['"),
    ("bad-tolerance", crit("- {id: c, points: 1, number: {label: total, expected: 5, tolerance: about}}"), (6, "about"),
     "error", "not a number or a percentage"),
    ("bad-number", crit("- {id: c, points: 1, number: {label: total, expected: lots}}"), (6, "lots"), "error", "as a number"),
    ("bad-path", crit("- {id: c, points: 1, json: {in: files.a.json, path: 'a[x', equals: 1}}"), (6, "'a[x"), "error", ""),
    ("nested-quantifier", crit("- {id: c, points: 1, regex: {in: transcript, pattern: '(a+)+$'}}"), (6, "'(a+)"),
     "warning", "backtracks exponentially"),
    ("nested-quantifier", crit("- {id: c, points: 1, json: {in: files.a.json, path: a, matches: '(a|a)*'}}"), (6, "'(a|a)"),
     "warning", "backtracks exponentially"),
    ("pattern-without-group", crit(r"- {id: c, points: 1, number: {pattern: '\d+', expected: 5}}"), (6, "'\\d"), "warning",
     "no group"),
    ("empty-text", crit("- {id: c, points: 1, contains: {text: ['a', '']}}"), (6, "['a"), "warning", "empty string"),
    ("empty-check", crit("- {id: c, points: 1, email_sent: {}}"), (6, "{}"), "warning", "no field given"),
    ("duplicate-test-id", crit("- {id: c, points: 1, tests: {fail_to_pass: [t1], pass_to_pass: [t1]}}"), (6, "{fail"),
     "warning", "in both lists: t1"),
    ("not-an-address", crit("- {id: c, points: 1, email_sent: {to: cfo}}"), (6, "cfo}"), "warning", "email address"),
]


@pytest.mark.parametrize("code, text, where, severity, fragment", CASES, ids=[c[0] for c in CASES])
def test_lint_code(tmp_path, code, text, where, severity, fragment):
    path = tmp_path / "rubric.yaml"
    path.write_text(text)
    problems = lint_file(path)
    found = [p for p in problems if p.code == code]
    assert found, f"no {code} in {[p.format(str(path)) for p in problems]}"
    problem = found[0]
    line, token = where   # the problem points at the first occurrence of token on that line
    line_text = text.splitlines()[line - 1] if line <= len(text.splitlines()) else ""
    assert (problem.line, problem.col) == (line, line_text.index(token) + 1 if token else 1), problem.format(str(path))
    assert problem.severity == severity and fragment in problem.format(str(path))


def test_io_error(tmp_path, capsys):
    path = tmp_path / "absent.rubric.yaml"
    assert [p.code for p in lint_file(path)] == ["io-error"]
    assert main(["lint", str(path)]) == 1
    assert capsys.readouterr().out.startswith(f"{path}:1:1: error: cannot read the file: ")


def test_check_error_for_a_broken_plugin(tmp_path, monkeypatch):
    from rubrics.checks import registry

    class BrokenEntryPoint:
        name = "broken"
        value = "nowhere:CHECK"

        def load(self):
            raise ImportError("no module named nowhere")

    monkeypatch.setattr(registry, "_entry_points", lambda: [BrokenEntryPoint()])
    registry.reset_plugins()
    try:
        path = tmp_path / "rubric.yaml"
        path.write_text(crit("- {id: c, points: 1, broken: {x: 1}}"))
        problems = lint_file(path)
        assert [(p.code, p.line, p.col) for p in problems] == [("check-error", 6, 24)]
        assert "cannot load entry point" in problems[0].message
    finally:
        monkeypatch.undo()
        registry.reset_plugins()


def test_every_code_in_the_catalogue_is_tested_and_every_emitted_code_is_catalogued():
    tested = {case[0] for case in CASES} | {"io-error", "check-error"}
    assert tested == set(LINT_CODES)
    root = Path(rubrics.__file__).parent
    sources = [*sorted((root / "rubric").glob("*.py")), *sorted((root / "checks").glob("*.py"))]
    emitted = set()
    for source in sources:
        text = source.read_text()
        emitted |= set(re.findall(r'\((?:ERROR|WARNING), "([a-z-]+)"', text))        # checks' lint tuples
        emitted |= set(re.findall(r'(?:problem|add)\(.*?"([a-z]+(?:-[a-z]+)+)"', text))  # our problems
        emitted |= set(re.findall(r'^\s+"([a-z]+(?:-[a-z]+)+)"(?:, ERROR| *\)|, WARNING|,$)', text, re.M))
    assert emitted - set(LINT_CODES) == set(), "codes emitted but not catalogued"


def test_the_example_is_clean(capsys):
    assert lint_file(EXAMPLE_RUBRIC) == []
    assert main(["lint", str(EXAMPLE_RUBRIC)]) == 0
    assert capsys.readouterr().out == ""


def test_cli_lint_output_format_and_exit_codes(tmp_path, capsys):
    warn_only = tmp_path / "warn.rubric.yaml"
    warn_only.write_text(crit("- {id: c, points: -2, judge: never invents numbers}"))
    broken = tmp_path / "rubric.yaml"
    broken.write_text(crit("- {id: c, points: 0, contains: {text: a}}"))
    assert main(["lint", str(warn_only)]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(rf"{re.escape(str(warn_only))}:6:21: warning: criteria\[1\]\.points: .* \[sign-mismatch\]\n", out)
    assert main(["lint", str(warn_only), str(broken)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(f"{broken}:6:21: error: criteria[1].points: points must not be 0")
    assert main(["lint", "--quiet", str(warn_only)]) == 0 and capsys.readouterr().out == ""


def test_cli_lint_expands_directories_to_rubric_files(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "team.rubric.yml").write_text(crit("- {id: c, points: 0, contains: {text: a}}"))
    (tmp_path / "other.yaml").write_text("not: [a rubric")   # not matched by the rubric file pattern
    assert main(["lint", str(tmp_path)]) == 1
    assert "team.rubric.yml:6:21: error" in capsys.readouterr().out


def test_all_problems_reported_in_one_run(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(yaml_text("""
        version: 1
        id: r
        task: t
        gates:
          - {id: g, points: 1, contains: {text: a}}
        criteria:
          - {id: g, points: 0, regex: {pattern: "("}}
          - {id: c, points: 1, contains: {in: nowhere, text: a}}
    """))
    codes = {p.code for p in lint_file(path)}
    assert codes >= {"gate-points", "duplicate-id", "zero-points", "invalid-regex", "unknown-selector"}


def test_a_problem_is_always_one_line(tmp_path, capsys):
    path = tmp_path / "rubric.yaml"
    path.write_text(HEAD + '"weird\\rkey\\u2028": 1\ncriteria:\n' + OK_CRITERION)
    assert main(["lint", str(path)]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and "weird\\rkey\\u2028" in out and "[unknown-key]" in out


def test_facts_are_suggested_for_gates_and_rewards_only_and_never_twice(tmp_path):
    path = tmp_path / "rubric.yaml"
    path.write_text(crit("- {id: p, points: -2, judge: quotes the $39 partner price}",
                         "- {id: f, points: 2, judge: {text: refunds $42, facts: [$42]}}",
                         "- {id: n, points: 1, judge: one page, readable by a CFO}"))
    assert [p for p in lint_file(path) if p.code == "facts-suggested"] == []
