"""Passes before and after the fix: the change must not break these."""
from invoicekit.totals import line_total


def test_pass_to_pass_1():
    assert line_total(2, 1.5) == 3.0


def test_pass_to_pass_2():
    assert line_total(0, 9.99) == 0.0
