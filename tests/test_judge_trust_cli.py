"""`rubric grade` in a subprocess with the embedded model: the verdict cache across runs (and a corrupt cache
file), a rubric's judge: panel section, usage and cost lines."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CFO = ROOT / "examples" / "cfo-mis"


def grade(rubric: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rubrics.cli.main", "grade", str(rubric), str(CFO / "trajectories"),
                           "--format", "jsonl", *args], capture_output=True, text=True, timeout=900, cwd=ROOT)


def results_of(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def total(results: list[dict], field: str) -> int:
    return sum(r["judge_usage"][field] for r in results if r["judge_usage"])


# The example's 40 judge items, less the 7 that a missing fact decides without the judge (its expected.json).
ASKED = 40 - sum(len(e["facts_missing"]) for e in json.loads((CFO / "expected.json").read_text())["trajectories"].values())


def test_a_second_grade_reads_every_verdict_from_the_cache(tmp_path):
    cache = tmp_path / "verdicts.sqlite"
    first = results_of(grade(CFO / "rubric.yaml", "--cache", str(cache), "--price-per-mtok", "0.5,2"))
    assert total(first, "prompt_tokens") > total(first, "cached_tokens") > 0 and total(first, "cached_verdicts") == 0
    done = grade(CFO / "rubric.yaml", "--cache", str(cache), "--price-per-mtok", "0.5,2")
    second = results_of(done)
    assert total(second, "prompt_tokens") == 0 and total(second, "cached_verdicts") == ASKED == 33
    assert [(r["score"], r["expected_score"]) for r in second] == [(r["score"], r["expected_score"]) for r in first]
    assert "judge usage: 0 prompt tokens (0 computed" in done.stderr and "33 verdicts from the verdict cache" in done.stderr
    assert "judge cost: $0.000000" in done.stderr
    uncached = results_of(grade(CFO / "rubric.yaml", "--no-cache"))
    assert total(uncached, "cached_verdicts") == 0 and total(uncached, "prompt_tokens") == total(first, "prompt_tokens")


def test_a_corrupt_cache_file_is_moved_aside_and_grading_goes_on(tmp_path):
    cache = tmp_path / "verdicts.sqlite"
    cache.write_bytes(b"\x00garbage, not sqlite" * 64)
    done = grade(CFO / "rubric.yaml", "--cache", str(cache))
    assert len(results_of(done)) == 8
    assert "moved it to verdicts.sqlite.bad-" in done.stderr
    assert list(tmp_path.glob("verdicts.sqlite.bad-*"))


def test_a_rubrics_panel_section_grades_with_the_panel_and_prints_its_agreement(tmp_path):
    text = (CFO / "rubric.yaml").read_text()
    rubric = tmp_path / "rubric.yaml"
    assert "judge:                  # optional per-rubric defaults\n" in text
    rubric.write_text(text.replace("# optional per-rubric defaults\n", "\n  panel:\n    members: [embedded:statement, "
                                               "embedded:likelihood]\n    combine: majority\n", 1))
    done = grade(rubric, "--no-cache")
    results = results_of(done)
    judged = [i for r in results for i in r["items"] if i["method"] == "judge" and not i["facts_missing"]]
    assert len(judged) == ASKED and all([m["judge"] for m in i["members"]] == ["embedded:statement",
                                                                               "embedded:likelihood"] for i in judged)
    assert all(i["probability"] in (0.0, 0.5, 1.0) for i in judged)   # majority: the share of members voting met
    assert results[0]["judge"] == "panel[majority](embedded:statement, embedded:likelihood)"
    assert "panel agreement: Fleiss' kappa" in done.stderr and f"over {ASKED} items" in done.stderr
