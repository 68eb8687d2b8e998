"""`rubric lint`: every problem of a rubric file, schema and beyond, with its code.

The rules themselves live where the data is understood: YAML problems in source_map.py, structure and
item rules in validation.py, rubric-wide rules in rules.py, and field rules of each check in that
check's `lint` (rubrics/checks/). This module is the catalogue and the entry point.
"""
from __future__ import annotations

from pathlib import Path

from rubrics.rubric.problems import Problem

# code -> what it means. Codes are stable: editors and CI filters match on them.
LINT_CODES = {
    "yaml-syntax": "the file is not valid YAML (or uses a tag, a recursive alias, aliases that expand past the "
                   "alias budget, nesting deeper than 200 levels, or a key that is not plain)",
    "duplicate-key": "a mapping repeats a key; YAML would silently keep the last value",
    "io-error": "the file cannot be read, or a file the rubric names (judge: calibration, head) is not a regular "
                "file or is larger than 16 MiB",
    "file-outside": "a file the rubric names (judge: calibration, head) lies outside the rubric's folder",
    "schema": "a field has the wrong type or value, or a required field is missing",
    "unknown-key": "a key that the rubric, the item or the check does not define (with a did-you-mean)",
    "missing-check": "an item has no check key",
    "multiple-checks": "an item has more than one check key (combine checks with all_of / any_of)",
    "missing-points": "a criterion has no points",
    "duplicate-id": "two items share an id",
    "gate-points": "a gate has points",
    "zero-points": "a criterion has 0 points",
    "no-positive-points": "no criterion has positive points, so the score has no denominator",
    "judge-option": "evidence / threshold / examples on an item that is not a judge item",
    "conflicting-option": "threshold given both on the item and under its judge:",
    "unknown-selector": "an `in` or `evidence` selector that does not exist",
    "sign-mismatch": "(warning) a penalty phrased as a reward, or a reward phrased as a failure",
    "facts-suggested": "(warning) a judge item without facts whose text, or a sentence of the reference that shares "
                       "its words, names an id, an amount, an address or a date: list them as facts",
    "check-error": "a custom check key whose entry point cannot be loaded, or whose lint crashed",
    # field rules of the built-in checks (rubrics/checks/)
    "invalid-regex": "a regex (regex.pattern, number.pattern, json.matches) does not compile",
    "invalid-glob": "a glob (attachment, subject, file path, tool name or argument) has an unclosed '['",
    "bad-tolerance": "number.tolerance is not a number or a percentage",
    "bad-number": "number.expected cannot be read as a number",
    "bad-path": "json.path is not a dotted path with [i] indices",
    "nested-quantifier": "(warning) a regex repeats a part that can match the same text in several ways, such as "
                         "(a+)+, (a*)* or (a|a)*: it can backtrack exponentially, and a match that runs past "
                         "the timeout makes the item an error",
    "pattern-without-group": "(warning) number.pattern has no group; the whole match is read",
    "empty-text": "(warning) contains.text has an empty string, which is found in any text",
    "empty-check": "(warning) a check with no condition (email_sent with no field, tests with no ids)",
    "duplicate-test-id": "(warning) a test id in both fail_to_pass and pass_to_pass",
    "not-an-address": "(warning) an email_sent address without '@'",
}


def lint_file(path: str | Path) -> list[Problem]:
    from rubrics.rubric.load import analyze_rubric

    _, problems, _ = analyze_rubric(Path(path))
    return problems

