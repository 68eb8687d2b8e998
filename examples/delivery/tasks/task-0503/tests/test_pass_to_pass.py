"""Passes before and after the fix: the change must not break these."""
from shopdb.migrations.add_index import down_sql


def test_pass_to_pass_1():
    assert down_sql().startswith("DROP INDEX")
