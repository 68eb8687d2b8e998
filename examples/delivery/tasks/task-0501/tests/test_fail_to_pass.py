"""Fails before the fix, passes after it."""
from ledger.migrations.m0042 import currency_column_sql


def test_fail_to_pass_1():
    assert "DEFAULT 'EUR'" in currency_column_sql()
