"""Property tests: whatever way a number is written, the parser reads back the same value."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from rubrics.checks.numbers import find_numbers, parse_number

SCALES = {"K": 3, "L": 5, "lakh": 5, "M": 6, "mn": 6, "Cr": 7, "crore": 7, "B": 9, "bn": 9}
CURRENCIES = ["", "₹", "$", "€", "£", "Rs. ", "INR "]


def western(integer: int) -> str:
    return f"{integer:,}"


def indian(integer: int) -> str:
    """4820000 -> "48,20,000": the last three digits, then groups of two."""
    digits = str(integer)
    if len(digits) <= 3:
        return digits
    head, tail = digits[:-3], digits[-3:]
    groups = []
    while len(head) > 2:
        groups.insert(0, head[-2:])
        head = head[:-2]
    return ",".join([head, *groups, tail])


amounts = st.integers(min_value=0, max_value=10**15)
fractions = st.integers(min_value=0, max_value=999)


@given(amounts, st.sampled_from([str, western, indian]), st.sampled_from(CURRENCIES), st.booleans())
def test_grouped_integers_round_trip(amount, style, currency, negative):
    text = ("-" if negative else "") + currency + style(amount)
    assert parse_number(text).value == (-amount if negative else amount)


@given(amounts, fractions, st.sampled_from([str, western, indian]))
def test_decimals_round_trip(amount, fraction, style):
    text = f"{style(amount)}.{fraction:03d}"
    assert parse_number(text).value == Decimal(f"{amount}.{fraction:03d}")


@given(st.integers(min_value=0, max_value=99999), fractions, st.sampled_from(sorted(SCALES)), st.sampled_from(["", " "]))
def test_scale_suffixes_round_trip(amount, fraction, suffix, gap):
    text = f"{amount}.{fraction:03d}{gap}{suffix}"
    assert parse_number(text).value == Decimal(f"{amount}.{fraction:03d}").scaleb(SCALES[suffix])


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["%", " %"]))
def test_percentages_keep_their_number(amount, sign):
    number = parse_number(f"{western(amount)}{sign}")
    assert number.percent and number.value == amount


@given(st.lists(st.tuples(amounts, st.sampled_from([western, indian])), min_size=1, max_size=5))
def test_numbers_in_prose_are_found_in_order(values):
    text = " and ".join(f"item {i}: {style(v)}" for i, (v, style) in enumerate(values))
    found = [n.value for n in find_numbers(text)]
    expected = [x for i, (v, _) in enumerate(values) for x in (i, v)]
    assert found == expected


@given(st.text(max_size=40))
def test_any_text_parses_or_returns_none(text):
    number = parse_number(text)
    assert number is None or isinstance(number.value, Decimal)
