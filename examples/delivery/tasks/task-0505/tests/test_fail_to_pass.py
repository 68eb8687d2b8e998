"""Fails before the fix, passes after it."""
from shopdb.backfill import full_name


def test_fail_to_pass_1():
    assert full_name("Ada", "", "Lovelace") == "Ada Lovelace"
