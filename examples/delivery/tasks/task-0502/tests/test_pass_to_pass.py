"""Passes before and after the fix: the change must not break these."""
from ledger.migrations.m0043 import downgrade_statements


def test_pass_to_pass_1():
    assert isinstance(downgrade_statements(), list)
