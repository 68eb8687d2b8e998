"""Passes before and after the fix: the change must not break these."""
from cartcore.discounts import apply_discounts


def test_pass_to_pass_1():
    assert apply_discounts(50.0, []) == 50.0


def test_pass_to_pass_2():
    assert apply_discounts(50.0, [0.5]) == 25.0
