"""Fails before the fix, passes after it."""
from invoicekit.totals import line_total


def test_fail_to_pass_1():
    assert line_total(3, 2.345) == 7.04


def test_fail_to_pass_2():
    assert line_total(1, 0.005) == 0.01
