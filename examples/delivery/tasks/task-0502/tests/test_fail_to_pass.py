"""Fails before the fix, passes after it."""
from ledger.migrations.m0043 import downgrade_statements


def test_fail_to_pass_1():
    assert downgrade_statements() == ["ALTER TABLE entries RENAME COLUMN amount TO amt"]
