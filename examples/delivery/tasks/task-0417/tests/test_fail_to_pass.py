"""Fails before the fix, passes after it."""
from invoicekit.totals import line_total


def test_fail_to_pass_1():
    assert line_total(1, 2.675) == 2.68


def test_fail_to_pass_2():
    assert line_total(1, 1.005) == 1.01
