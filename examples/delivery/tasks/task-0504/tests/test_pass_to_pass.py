"""Passes before and after the fix: the change must not break these."""
from payroll.alembic_chain import heads


def test_pass_to_pass_1():
    assert heads([]) == []
