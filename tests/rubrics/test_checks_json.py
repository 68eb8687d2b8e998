from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import CheckError, get_check, run_check, validate_config
from rubrics.checks.json_path import parse_path

DOCUMENT = '{"summary": {"total": 4820000, "flags": ["EXP-221", "EXP-307"], "ok": true, "x.y": null}}'


def run(answer=DOCUMENT, **config):
    return run_check("json", config, make_trajectory(final_answer=answer))


def test_paths():
    assert parse_path("summary.flags[1]") == ["summary", "flags", 1]
    assert parse_path('$.summary["x.y"]') == ["summary", "x.y"]
    assert parse_path("") == [] and parse_path("[-1]") == [-1]
    for bad in ("a..b", "a[x]", "a[0]b", 'a["x]'):
        with pytest.raises(ValueError):
            parse_path(bad)


def test_equals_one_of_matches():
    outcome = run(path="summary.total", equals=4820000)
    assert outcome.met and outcome.evidence == "summary.total is 4820000; expected 4820000"
    assert run(path="summary.flags[-1]", one_of=["EXP-307", "EXP-308"]).met
    assert run(path="summary.flags", matches=r"EXP-221.*EXP-307").met  # non-strings are matched as JSON text
    assert run(path='summary["x.y"]', equals=None).met
    assert not run(path="summary.ok", equals=1).met  # true is not 1
    assert run(path="summary.ok", equals=True).met
    outcome = run(path="summary.total", one_of=[1, 2])
    assert not outcome.met and outcome.evidence == "summary.total is 4820000; expected one of [1, 2]"


def test_fenced_json_block_is_accepted():
    answer = "Here is the summary:\n\n```json\n" + DOCUMENT + "\n```\nThanks."
    assert run(answer, path="summary.flags[0]", equals="EXP-221").met


def test_a_json_block_after_another_fenced_block_is_found():
    answer = ("The query:\n\n```sql\nSELECT * FROM expenses;\n```\n\nThe summary:\n\n```json\n" + DOCUMENT
              + "\n```\n")
    assert run(answer, path="summary.flags[0]", equals="EXP-221").met
    three = "```python\nprint(1)\n```\ntext\n```sh\nls\n```\n```json\n" + DOCUMENT + "\n```"
    assert run(three, path="summary.total", equals=4820000).met


FENCES = [   # (markdown, fenced_blocks) by CommonMark's fence rules (spec 0.31, section 4.5)
    ("```json\n{}\n```", [("json", "{}")]),
    ("~~~json\n{}\n~~~", [("json", "{}")]),
    ("````json\n```\n{}\n````", [("json", "```\n{}")]),             # a shorter fence inside does not close
    ("```json\n{}\n~~~\n```", [("json", "{}\n~~~")]),                # nor one of the other character
    ("```json\n{}\n`````", [("json", "{}")]),                          # a longer closing fence closes
    ("```json\n{}\n```  \t", [("json", "{}")]),                        # trailing blanks after it
    ("```json\n{}\n``` x", [("json", "{}\n``` x")]),                   # a closing fence has no info string
    ("  ```json\n  {\n    }\n ```", [("json", "{\n  }")]),              # indentation removed up to the fence's
    ("    ```json\n{}\n```", [("", "")]),                                # 4 spaces: not a fence; the last line
    ("``` json title=\"a.json\"\n{}\n```", [("json", "{}")]),          # opens an empty block. The language:
                                                                     # the info string's first word
    ("```json\n{}", [("json", "{}")]),                                  # unclosed: runs to the end
    ("```json {} ```\n", []),                                           # backticks in the info: not a fence
    ("~~~ a`b\nx\n~~~", [("a`b", "x")]),                                # ... allowed after tildes
    ("``json\n{}\n``", []),                                             # two backticks: not a fence
    ("```sql\nSELECT 1;\n```\n```json\n{}\n```", [("sql", "SELECT 1;"), ("json", "{}")]),
    ("```json\r\n{}\r\n```\r\n", [("json", "{}")]),                    # CRLF line ends
]


@pytest.mark.parametrize("markdown, blocks", FENCES)
def test_fenced_blocks_follow_commonmark(markdown, blocks):
    from rubrics.checks.json_path import fenced_blocks

    assert fenced_blocks(markdown) == blocks


def test_a_json_tagged_block_is_preferred_and_an_untagged_one_still_counts():
    untagged_first = "```\n{\"summary\": {\"total\": 1}}\n```\n```json\n" + DOCUMENT + "\n```"
    assert run(untagged_first, path="summary.total", equals=4820000).met
    assert run("```\n" + DOCUMENT + "\n```", path="summary.total", equals=4820000).met
    assert not run("```yaml\n" + DOCUMENT + "\n```", path="summary.total", equals=4820000).met


def test_many_fences_parse_in_one_pass():
    answer = "```sql\nx\n```\n" * 20000 + "```json\n" + DOCUMENT + "\n```"
    assert run(answer, path="summary.total", equals=4820000).met


def test_missing_path_and_unparseable_text_are_unmet_with_evidence():
    outcome = run(path="summary.flags[5]", equals="x")
    assert not outcome.met and outcome.evidence == "summary.flags[5] not found in final_answer: summary.flags has 2 items, no [5]"
    outcome = run(path="summary.owner.name", equals="x")
    assert outcome.evidence.endswith("summary has no key 'owner'")
    outcome = run("Total: 48.2L", path="total", equals=1)
    assert not outcome.met and outcome.evidence.startswith("final_answer is not JSON (Expecting value: line 1 column 1")
    outcome = run_check("json", {"path": "a", "equals": 1}, make_trajectory())
    assert not outcome.met and "no final answer" in outcome.evidence


def test_reads_files_and_state():
    trajectory = make_trajectory(files={"out/summary.json": DOCUMENT}, ledger={"rows": [{"id": 1}]})
    assert run_check("json", {"in": "files.out/*.json", "path": "summary.total", "equals": 4820000}, trajectory).met
    assert run_check("json", {"in": "state.ledger", "path": "rows[0].id", "equals": 1}, trajectory).met


def test_config_validation_and_lint():
    with pytest.raises(ValidationError, match="exactly one of equals, one_of, matches"):
        validate_config("json", {"path": "a"})
    with pytest.raises(ValidationError, match="exactly one of equals, one_of, matches"):
        validate_config("json", {"path": "a", "equals": 1, "matches": "1"})
    spec = get_check("json")
    config = spec.config_model.model_validate({"path": "a..b", "matches": "(", "in": "final"})
    assert sorted(c for _, c, _ in spec.lint(config)) == ["bad-path", "invalid-regex", "unknown-selector"]
    with pytest.raises(CheckError, match="path: cannot read path 'a..b'"):
        run(path="a..b", equals=1)
