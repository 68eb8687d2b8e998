"""The shipped labelled judgments (examples/labels/<domain>/) and their fixed split: every domain in the split once,
every label on a judge item of its rubric, every judge item of a labelled trajectory labelled once, evidence for
the judge to read behind every label, and the shape the judge-quality figures rely on (balance, near misses,
gates, criteria and penalties). No model runs here: the evidence is found by grading with a scripted judge."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from judge_models import LABELS_DIR, REPO
from rubric_fakes import ScriptedJudge
from rubrics import trust as je
from rubrics.judges.protocol import Verdict
from rubrics.rubric.load import load_rubric

SPLIT = yaml.safe_load((LABELS_DIR / "split.yaml").read_text())
# The first nine domains came before near misses were marked and before the split; the checks of shape that
# need a mark apply to the domains written since.
FIRST_DOMAINS = {"bugfix-tests", "cfo-mis", "data-analysis", "email-triage", "invoice-fix", "meeting-scheduling",
                 "research-summary", "support-refunds", "travel-booking"}
DOMAINS = sorted(path.parent.name for path in LABELS_DIR.glob("*/labels.jsonl"))


def rubric_of(domain: str) -> Path:
    own = LABELS_DIR / domain / "rubric.yaml"
    return own if own.exists() else REPO / "examples" / domain / "rubric.yaml"


def judged(domain: str):
    rubric = load_rubric(rubric_of(domain))
    labels = je.load_labels(LABELS_DIR / domain / "labels.jsonl")
    judge = ScriptedJudge(lambda request: Verdict(met=True, probability=0.5))
    pairs, skipped = je.judge_labels(labels, rubric, judge)
    return rubric, labels, pairs, skipped


def test_the_split_names_every_labelled_domain_once():
    train, held_out = SPLIT["train"], SPLIT["held_out"]
    assert len(train) == len(set(train)) and len(held_out) == len(set(held_out))
    assert not set(train) & set(held_out)
    assert sorted(train + held_out) == DOMAINS
    assert len(held_out) >= 8 and not set(held_out) & FIRST_DOMAINS   # nothing fitted so far saw a held-out one


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_label_is_on_a_judge_item_with_evidence_and_each_item_is_labelled_once(domain):
    rubric, labels, pairs, skipped = judged(domain)
    assert not skipped, skipped[:3]
    judge_items = {item.id for item in rubric.items if item.is_judge}
    seen = [(label.trajectory_key, label.item_id) for label in labels]
    assert len(seen) == len(set(seen)), "a (trajectory, item) pair is labelled twice"
    for key in {label.trajectory_key for label in labels}:
        labelled = {label.item_id for label in labels if label.trajectory_key == key}
        assert labelled == judge_items, f"{key}: judge items without a label: {sorted(judge_items - labelled)}"
    empty = [pair.label.source for pair in pairs if pair.no_evidence and not pair.facts_missing]
    assert not empty, f"labels whose evidence selectors find nothing (decided without the judge): {empty[:3]}"
    met = sum(label.met for label in labels) / len(labels)
    assert 0.25 < met < 0.75, f"{domain}: {met:.0%} of the labels are met"


@pytest.mark.parametrize("domain", [d for d in DOMAINS if d not in FIRST_DOMAINS])
def test_a_new_domain_has_gates_criteria_penalties_and_near_misses(domain):
    rubric, labels, _, _ = judged(domain)
    assert len(labels) >= 60
    assert all(label.difficulty in je.DIFFICULTIES for label in labels), "every label says clear or hard"
    labelled = {label.item_id for label in labels}
    gates = {item.id for item in rubric.gates}
    positive = {item.id for item in rubric.criteria if item.points > 0}
    penalties = {item.id for item in rubric.criteria if item.points < 0}
    assert labelled & gates and labelled & positive and labelled & penalties
    unmet = [label for label in labels if not label.met]
    assert sum(label.near_miss for label in unmet) * 3 >= len(unmet), "at least a third of the unmet are near misses"
    for kind in (gates, positive, penalties):   # met and unmet labels on each kind of item
        assert {label.met for label in labels if label.item_id in kind} == {True, False}


def test_the_new_domains_hold_at_least_2000_labels_in_30_domains():
    new = [d for d in DOMAINS if d not in FIRST_DOMAINS]
    count = sum(len((LABELS_DIR / d / "labels.jsonl").read_text().splitlines()) for d in new)
    assert len(new) >= 30 and count >= 2000, (len(new), count)
