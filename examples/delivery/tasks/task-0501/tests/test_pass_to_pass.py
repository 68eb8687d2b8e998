"""Passes before and after the fix: the change must not break these."""
from ledger.migrations.m0042 import currency_column_sql


def test_pass_to_pass_1():
    assert "NOT NULL" in currency_column_sql()
