"""Passes before and after the fix: the change must not break these."""
from shopdb.backfill import full_name


def test_pass_to_pass_1():
    assert full_name("A", "B", "C").startswith("A ")
