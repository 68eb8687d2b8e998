"""Passes before and after the fix: the change must not break these."""
from invoicekit.credit_notes import credit_line_total


def test_pass_to_pass_1():
    assert credit_line_total(4, 0.25) == 1.0
