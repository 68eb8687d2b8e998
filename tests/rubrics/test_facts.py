"""Facts on a judge item (`judge: {text: ..., facts: [...]}`): literals and numbers the item depends on, looked up in
the item's evidence before the judge is asked.

A missing fact decides the item unmet without the judge (a penalty then does not apply, a gate fails) and the
evidence names it; an item whose facts are all found is the judge's to decide, and its evidence says where each
fact was. Numbers match in every notation the `number` check reads. Then the real path: the embedded judge (the
tiny test model) asks nothing about an item whose fact is missing."""
from __future__ import annotations

import pytest
from rubric_fakes import ScriptedJudge, trajectory, yaml_text

import rubrics
from judge_models import tiny_judge_model
from rubrics.checks.facts import EvidenceText, compile_fact, match_facts
from rubrics.judges.backends.embedded import EmbeddedJudge
from rubrics.judges.protocol import Verdict
from rubrics.rubric.load import RubricError, load_rubric

RUBRIC = yaml_text("""
    version: 1
    id: facts
    task: Prepare the Q3 travel MIS and flag the expenses approved without sign-off.
    reference: EXP-221 and EXP-307 were approved without sign-off. Total travel spend 48.2L.
    gates:
      - id: total
        judge: {text: reports the total travel spend, facts: [{number: 48.2L, tolerance: 0.5%}]}
    criteria:
      - id: flags-unsigned
        points: 3
        judge: {text: flags the 2 expenses approved without sign-off, facts: [EXP-221, EXP-307]}
      - {id: polite, points: 1, judge: the answer is polite}
      - id: partner-price
        points: -2
        judge: {text: quotes the internal partner price, facts: [{any: [$39, partner price]}]}
""")


def found(fact, text: str) -> bool:
    return match_facts((compile_fact(fact),), [EvidenceText("final_answer", text)]).complete


def graded(final: str, met: bool = True):
    judge = ScriptedJudge(lambda request: Verdict(met=met, probability=0.9 if met else 0.1))
    result = rubrics.score(trajectory(final), RUBRIC, judge=judge)
    asked = [request.item.id for call in judge.calls for request in call]
    return {item.id: item for item in result.items}, result, asked


@pytest.mark.parametrize("text", ["EXP-221", "exp-221", "see EXP-221.", "EXP-221, EXP-307", "(EXP-221)",
                                  "ids: EXP-221\n"])
def test_a_literal_is_found_whatever_its_case(text):
    assert found("EXP-221", text)


@pytest.mark.parametrize("text", ["EXP-2210", "EXP-1221", "EXP-22", "EXP 221", "EXP-2 21"])
def test_a_literal_is_not_found_inside_a_longer_number_or_when_written_otherwise(text):
    assert not found("EXP-221", text)


def test_blanks_match_any_run_of_blanks_and_a_date_is_found_before_a_time():
    assert found("14 March 2025", "deadline:  14\n March   2025 (urgent)")
    assert found("2024-04-03", '{"start": "2024-04-03T15:45:00"}')
    assert found("15:45", "T15:45:00") and not found("5:45", "15:45")


@pytest.mark.parametrize("text", ["48.2L", "48.2 L", "48.2 lakh", "₹48.2 lakhs", "Rs. 48,20,000", "48,20,000",
                                  "4,820,000", "4820000", "INR 4820k", "0.482 Cr", "$4.82 million", "4.82m",
                                  "(4,820,000)", "total 48.3L", "48.0L"])
def test_a_number_is_found_in_every_notation_the_number_check_reads(text):
    assert found({"number": "48.2L", "tolerance": "0.5%"}, text)


@pytest.mark.parametrize("text", ["48.5L", "4.82 Cr", "48,200", "482", "EXP4820000"])
def test_a_number_outside_its_tolerance_or_inside_a_word_is_not_found(text):
    assert not found({"number": "48.2L", "tolerance": "0.5%"}, text)


def test_a_string_that_reads_as_a_number_is_a_number_and_text_makes_it_a_literal():
    assert found("$3,125", "claim filed for 3125.00 USD") and found(3125, "$3,125")
    assert found("12%", "up 12 %") and found(-42, '"delta": -42') and not found(-42, '"delta": 42')
    assert not found({"text": "884213"}, "884,213") and found({"text": "884213"}, "ref 884213.")
    assert found({"number": 1000, "tolerance": 50}, "1,049") and not found({"number": 1000, "tolerance": 50}, "1,051")


def test_case_sensitive_and_any():
    assert not found({"text": "High", "case_sensitive": True}, "severity: high")
    assert found({"any": ["$39", "partner price"]}, "our Partner  Price") and found({"any": ["$39", "x"]}, "39 dollars")
    assert not found({"any": ["$39", "partner price"]}, "$49 per user")


def test_every_fact_found_the_judge_decides_and_the_evidence_says_where():
    items, result, asked = graded("Total travel spend 48,20,000. Unsigned: EXP-221 and exp-307. Thanks!")
    assert asked == ["total", "flags-unsigned", "polite"]   # partner-price: no fact found, not asked
    assert items["flags-unsigned"].status == "met" and items["total"].status == "met"
    assert items["flags-unsigned"].evidence == ("the judge read final_answer: met at 0.90 (threshold 0.5); facts "
                                                "'EXP-221', 'EXP-307' found in final_answer")
    assert "fact 48.2L ± 0.5% (as '48,20,000 (= 4,820,000)') found in final_answer" in items["total"].evidence
    assert result.score == 1.0


def test_a_missing_fact_decides_the_item_unmet_without_the_judge_and_is_named():
    items, result, asked = graded("Total travel spend 48.2L. Unsigned: EXP-221 and EXP-309.")
    assert "flags-unsigned" not in asked
    item = items["flags-unsigned"]
    assert (item.status, item.probability, item.uncertain, item.facts_missing) == ("unmet", None, False, ["'EXP-307'"])
    assert item.evidence == "fact 'EXP-307' not found in final_answer (found: 'EXP-221' in final_answer)"
    assert result.complete and result.earned == 1


def test_the_judge_still_decides_when_every_fact_is_found():
    items, result, _ = graded("Total travel spend 48.2L. Unsigned: EXP-221 and EXP-307.", met=False)
    assert items["flags-unsigned"].status == "unmet" and items["flags-unsigned"].probability == 0.1


def test_a_gate_with_a_missing_fact_fails_and_a_penalty_needs_its_facts():
    items, result, asked = graded("Total travel spend 51L. Unsigned: EXP-221 and EXP-307. Partner price $39.")
    assert items["total"].status == "unmet" and result.gates_passed is False and result.score == 0.0
    assert "total" not in asked and items["partner-price"].status == "met"   # found, and the judge says it occurred
    items, result, asked = graded("Total travel spend 48.2L. EXP-221, EXP-307. List price $49.")
    assert items["partner-price"].status == "unmet" and "partner-price" not in asked
    assert result.score == 1.0   # the penalty does not apply: nothing it must mention is there


def test_facts_are_looked_up_in_the_items_evidence_only():
    rubric = RUBRIC.replace("facts: [EXP-221, EXP-307]}", "facts: [EXP-221, EXP-307]}\n    evidence: [emails]")
    data = trajectory("EXP-221 and EXP-307", outbox=[{"to": ["cfo@acme.test"], "subject": "MIS", "body": "EXP-221"}])
    result = rubrics.score(data, rubric, judge=ScriptedJudge())
    item = next(i for i in result.items if i.id == "flags-unsigned")
    assert item.status == "unmet" and item.evidence.startswith("fact 'EXP-307' not found in emails")


def test_facts_with_parts_ask_no_part_when_a_fact_is_missing():
    rubric = yaml_text("""
        version: 1
        id: parts-facts
        task: t
        criteria:
          - id: both
            points: 2
            judge: {text: refunds $42 and emails R-1, parts: [refunds $42, emails R-1], facts: [R-1, $42]}
    """)
    judge = ScriptedJudge()
    result = rubrics.score(trajectory("Refunded $42."), rubric, judge=judge)
    assert judge.calls == [] and result.items[0].status == "unmet"
    result = rubrics.score(trajectory("Refunded $42, sent R-1."), rubric, judge=judge)
    assert [r.item.id for r in judge.calls[0]] == ["both#1", "both#2"] and result.items[0].status == "met"


@pytest.mark.parametrize("facts, field, message", [
    ("[{number: lots}]", "facts.0.number", "cannot read 'lots' as a number"),
    ("[{number: 5, tolerance: some}]", "facts.0.tolerance", "cannot read 'some'"),
    ("[{any: [one]}]", "facts.0.any", "at least 2"),
    ("[]", "facts", "at least 1"),
    ("[{text: x, case: true}]", "facts.0.case", "unknown key"),
    ("[true]", "facts.0", "valid"),
])
def test_a_malformed_fact_is_an_error_that_names_the_line_and_field(tmp_path, facts, field, message):
    path = tmp_path / "rubric.yaml"
    path.write_text(f"version: 1\nid: x\ntask: t\ncriteria:\n  - id: a\n    points: 1\n"
                    f"    judge: {{text: t, facts: {facts}}}\n")
    with pytest.raises(RubricError) as caught:
        load_rubric(path)
    text = str(caught.value)
    assert f"{path}:7:" in text and field.split(".")[0] in text and message in text


def test_the_embedded_judge_is_not_asked_about_an_item_whose_fact_is_missing(tmp_path_factory):
    judge = EmbeddedJudge(model=str(tiny_judge_model(str(tmp_path_factory.mktemp("facts-model")))), method="choice")
    missing = rubrics.score(trajectory("Spend 48.2L. EXP-221 only. Thanks."), RUBRIC, judge=judge)
    requests_before = judge.stats()["requests"]
    assert [i.status for i in missing.items if i.id == "flags-unsigned"] == ["unmet"]
    complete = rubrics.score(trajectory("Spend 48.2L. EXP-221 and EXP-307. Thanks."), RUBRIC, judge=judge)
    flags = next(i for i in complete.items if i.id == "flags-unsigned")
    assert flags.probability is not None and "; facts 'EXP-221', 'EXP-307' found in final_answer" in flags.evidence
    # total, polite then total, flags-unsigned, polite: the missing fact cost the engine no request
    assert requests_before == 2 and judge.stats()["requests"] == 5
