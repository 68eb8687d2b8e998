"""A judge item whose evidence selectors all find nothing is unmet without asking the judge, as a code check is on
missing data, and its evidence says what was missing (an agent that never sent the email is not judged to have
thanked the candidate in it)."""
from __future__ import annotations

import json
import subprocess
import sys

from rubric_fakes import REPO, ScriptedJudge, trajectory, yaml_text

from rubrics.grading.scoring import score, score_many

RUBRIC = yaml_text("""
    version: 1
    id: rejection-email
    task: Send the candidate a kind rejection email.
    criteria:
      - {id: thanks, points: 2, judge: thanks the candidate, evidence: [emails]}
      - {id: says-why, points: 1, judge: gives the reason, evidence: [emails, final_answer]}
      - {id: rude, points: -2, judge: is rude to the candidate, evidence: [emails]}
    gates:
      - {id: decision, judge: states the decision clearly, evidence: [emails]}
""")
EMAIL = {"from": "hr@acme.test", "to": ["ana@example.test"], "subject": "Your application",
         "body": "Thank you, Ana. We will not move forward.", "attachments": []}


def test_items_with_no_evidence_are_unmet_and_never_reach_the_judge():
    judge = ScriptedJudge()
    result = score(trajectory(final="I sent Ana a kind rejection email."), RUBRIC, judge=judge)
    items = {item.id: item for item in result.items}
    asked = [request.item.id for call in judge.calls for request in call]
    assert asked == ["says-why"]   # the final answer is evidence for it; the others have none at all
    for name in ("thanks", "rude", "decision"):
        assert items[name].status == "unmet" and items[name].method == "judge"
        assert items[name].probability is None and items[name].uncertain is False
        assert items[name].evidence.startswith("no evidence to judge (emails: no email")
    assert result.gates_passed is False and result.score == 0.0 and result.complete
    assert result.expected_score == 0.0


def test_with_the_evidence_present_every_item_is_judged():
    judge = ScriptedJudge()
    score(trajectory(final="done", outbox=[EMAIL]), RUBRIC, judge=judge)
    assert sorted(request.item.id for call in judge.calls for request in call) == \
        ["decision", "rude", "says-why", "thanks"]


def test_one_trajectory_without_evidence_does_not_change_another_in_the_same_batch():
    judge = ScriptedJudge()
    empty, full = score_many([trajectory(id="empty"), trajectory(id="full", final="done", outbox=[EMAIL])], RUBRIC,
                             judge=judge)
    assert [i.status for i in empty.items] == ["unmet"] * 4
    assert all(i.status == "met" for i in full.items)
    assert len(judge.calls) == 1 and len(judge.calls[0]) == 4


def test_the_cli_decides_them_without_a_judge_and_says_what_was_missing(tmp_path):
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(RUBRIC)
    (tmp_path / "t.json").write_text(json.dumps(trajectory(final="")))
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "grade", str(rubric), str(tmp_path / "t.json"),
                           "--judge", "none", "--format", "json"], cwd=REPO, capture_output=True, text=True)
    result = json.loads(done.stdout)[0]
    items = {item["id"]: item for item in result["items"]}
    assert items["says-why"]["status"] == "unmet" and "final_answer: no final answer" in items["says-why"]["evidence"]
    assert items["thanks"]["evidence"].startswith("no evidence to judge (emails: ")
