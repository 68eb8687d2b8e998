"""Fails before the fix, passes after it."""
from cartcore.discounts import apply_discounts


def test_fail_to_pass_1():
    assert apply_discounts(100.0, [0.1, 0.1]) == 81.0
