"""Fails before the fix, passes after it."""
from invoicekit.credit_notes import credit_line_total


def test_fail_to_pass_1():
    assert credit_line_total(1, 2.675) == 2.68
