"""Fails before the fix, passes after it."""
from payroll.alembic_chain import heads


def test_fail_to_pass_1():
    assert heads([("a", None), ("b", "a"), ("c", "b")]) == ["c"]
