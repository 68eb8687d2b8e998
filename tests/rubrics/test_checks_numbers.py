from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import CheckError, get_check, run_check, validate_config
from rubrics.checks.numbers import find_numbers, parse_number, parse_tolerance


@pytest.mark.parametrize(
    "text",
    ["48.2L", "48,20,000", "₹48.2 lakh", "0.482 Cr", "Rs. 48,20,000", "INR 48.2 lakhs", "4,820,000", "4.82M", "0.482 crore", "4820K"],
)
def test_the_same_amount_in_every_notation(text):
    assert parse_number(text).value == Decimal(4820000)


def test_a_crore_is_a_hundred_lakh():
    # 48.2 lakh is 0.482 crore; "4.82 Cr" is ten times more and must not pass for it.
    assert parse_number("4.82 Cr").value == Decimal(48_200_000) == parse_number("482L").value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("$1.2bn", Decimal("1.2e9")),
        ("€3,000.50", Decimal("3000.50")),
        ("£2mn", Decimal(2_000_000)),
        ("5 M", Decimal(5_000_000)),
        ("-5", Decimal(-5)),
        ("−5", Decimal(-5)),
        ("$-5", Decimal(-5)),
        (".5", Decimal("0.5")),
        ("1,23,456", Decimal(123456)),
        ("12%", Decimal(12)),
        ("12 %", Decimal(12)),
        ("3 thousand", Decimal(3000)),
    ],
)
def test_parse_number(text, value):
    assert parse_number(text).value == value


def test_units_that_are_not_scales_stay_plain():
    assert [n.value for n in find_numbers("5 m of cable, 2 km away, 3rd floor, v1.2.3")] == [5, 2]
    assert parse_number("48.2X") is None
    assert parse_number("Q3") is None


def test_percent_and_parentheses_are_recorded():
    assert parse_number("12%").percent
    both = parse_number("(1,234)")
    assert both.parenthesized and both.candidates() == (Decimal(1234), Decimal(-1234))


def test_tolerance_forms():
    assert parse_tolerance("0.5%").relative and parse_tolerance("0.5%").amount == Decimal("0.005")
    assert parse_tolerance("±10K").amount == Decimal(10000)
    assert parse_tolerance("+/- 1000").amount == Decimal(1000)
    assert parse_tolerance(0.25).amount == Decimal("0.25")
    assert parse_tolerance("about right") is None
    assert parse_tolerance("-1") is None


def run(text, **config):
    return run_check("number", config, make_trajectory(final_answer=text))


def test_spec_gate_met_with_the_evidence_it_promises():
    outcome = run("Total travel spend: 48,20,000 for Q3", label="total travel spend", expected="48.2L", tolerance="0.5%")
    assert outcome.met
    assert outcome.evidence == "found 48,20,000 (= 4,820,000) after 'total travel spend'; expected 4,820,000 ± 0.5%"


@pytest.mark.parametrize("written", ["48.2L", "48,20,000", "₹48.2 lakh", "0.482 Cr", "₹ 48.2 Lakh", "INR 4.82M"])
def test_label_finds_each_notation(written):
    assert run(f"**Total travel spend**: {written}", label="Total Travel Spend", expected="0.482 Cr").met


def test_tolerance_relative_and_absolute():
    assert run("total: 48.4L", label="total", expected="48.2L", tolerance="0.5%").met  # 0.41% off
    assert not run("total: 48.5L", label="total", expected="48.2L", tolerance="0.5%").met  # 0.62% off
    assert run("total: 48.5L", label="total", expected="48.2L", tolerance="50K").met
    assert not run("total: 48.21L", label="total", expected="48.2L").met  # default exact


def test_label_takes_the_first_number_on_the_same_line_only():
    text = "Total travel spend\n48.2L\nTotal travel spend in 2024: 41.5L"
    outcome = run(text, label="total travel spend", expected="48.2L")
    assert not outcome.met and "found 2024" in outcome.evidence  # the heading has no number; the next line's label does


def test_label_is_a_whole_word():
    assert run("Subtotal: 5\nTotal: 10", label="total", expected=10).met
    assert run("Q3 total(INR): 10", label="total(INR)", expected=10).met


def test_no_number_is_unmet_and_says_so():
    outcome = run("Total travel spend: unknown", label="total travel spend", expected="48.2L")
    assert not outcome.met and outcome.evidence.startswith("no number found after 'total travel spend'")
    outcome = run("nothing relevant", label="total travel spend", expected="48.2L")
    assert "label 'total travel spend' not found" in outcome.evidence
    outcome = run_check("number", {"label": "x", "expected": 1}, make_trajectory())
    assert not outcome.met and "no final answer" in outcome.evidence


def test_negative_numbers_and_accounting_parentheses():
    assert run("Net change: -3.5L", label="net change", expected="-350000").met
    assert run("Net change: (3.5L)", label="net change", expected="-3.5L").met
    assert run("Net change: -3.5L", label="net change", expected="(3.5L)").met
    assert not run("Net change: 3.5L", label="net change", expected="(3.5L)").met
    assert run("Total spend (48.2L) is up", label="total spend", expected="48.2L").met  # an aside, not a negative


def test_percentages():
    assert run("Growth: 12% vs Q2", label="growth", expected="12%").met
    assert run("Growth: 12 %", label="growth", expected=12).met
    outcome = run("Growth: 16.1%", label="growth", expected="12%", tolerance=1)
    assert not outcome.met and outcome.evidence.startswith("found 16.1% after 'growth'")


def test_pattern_reads_the_first_group():
    text = "Q2: 41.5L, Q3: 48.2L"
    assert run(text, pattern=r"Q3: (\S+)", expected="48.2L").met
    outcome = run(text, pattern=r"Q4: (\S+)", expected="48.2L")
    assert not outcome.met and "did not match" in outcome.evidence


def test_reads_other_selectors():
    trajectory = make_trajectory(files={"mis.md": "| Total | ₹0.482 Cr |"})
    assert run_check("number", {"in": "files.mis.md", "label": "total", "expected": "48.2L"}, trajectory).met


def test_config_validation():
    with pytest.raises(ValidationError, match="exactly one of `label` or `pattern`"):
        validate_config("number", {"expected": 1})
    with pytest.raises(ValidationError, match="exactly one of `label` or `pattern`"):
        validate_config("number", {"label": "a", "pattern": "(1)", "expected": 1})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        validate_config("number", {"label": "a", "expected": 1, "tolerence": "1%"})
    with pytest.raises(ValidationError):
        validate_config("number", {"label": "a"})


def lint(**config):
    spec = get_check("number")
    return [(severity, code) for severity, code, _ in spec.lint(spec.config_model.model_validate(config))]


def test_lint_codes():
    assert lint(label="a", expected="48.2L", tolerance="0.5%") == []
    assert lint(label="a", expected="lots") == [("error", "bad-number")]
    assert lint(label="a", expected=1, tolerance="some") == [("error", "bad-tolerance")]
    assert lint(pattern="(unclosed", expected=1) == [("error", "invalid-regex")]
    assert lint(pattern=r"\d+", expected=1) == [("warning", "pattern-without-group")]
    assert lint(**{"in": "final", "label": "a", "expected": 1}) == [("error", "unknown-selector")]


def test_unlintable_config_is_a_check_error_at_run_time():
    with pytest.raises(CheckError, match="expected: cannot read 'lots'"):
        run("x: 1", label="x", expected="lots")
    with pytest.raises(CheckError, match="invalid regex"):
        run("x: 1", pattern="(", expected=1)


def test_finding_numbers_in_agent_text_stays_linear():
    """Each match attempt reads a bounded stretch: 40,000 comma groups (which took minutes when the grouping was
    unbounded, each attempt reading to the end of the text) are scanned in well under the bound."""
    import time

    from rubrics.checks.numbers import find_numbers

    started = time.perf_counter()
    assert sum(1 for _ in find_numbers("11," * 40_000)) == 40_000
    assert sum(1 for _ in find_numbers("111," * 40_000)) >= 1
    assert time.perf_counter() - started < 20  # linear: ~0.3 s here; quadratic: minutes
    assert [n.value for n in find_numbers("48,20,000 and 1,234,567.5")] == [Decimal("4820000"), Decimal("1234567.5")]


@pytest.mark.parametrize("repeats", [1_000, 8_000])
def test_a_label_repeated_on_one_line_is_scanned_once_not_once_per_occurrence(monkeypatch, repeats):
    """Work counted in characters handed to the number scanner, not in seconds: 152 KB of a repeated label used to
    cost one scan of the rest of the line per occurrence (quadratic: 106 s)."""
    from rubrics.checks import numbers

    scanned = []
    real = numbers.find_numbers

    def counting(text, start=0, end=None):
        scanned.append((len(text) if end is None else end) - start)
        return real(text, start, end)

    monkeypatch.setattr(numbers, "find_numbers", counting)
    text = "total travel spend " * repeats + "\nthe total travel spend is 48.2L"
    outcome = run_check("number", {"label": "total travel spend", "expected": "48.2L"},
                        make_trajectory(final_answer=text))
    assert outcome.met and sum(scanned) <= 2 * len(text)
