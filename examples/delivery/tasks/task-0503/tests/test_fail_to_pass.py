"""Fails before the fix, passes after it."""
from shopdb.migrations.add_index import down_sql


def test_fail_to_pass_1():
    assert down_sql() == "DROP INDEX idx_orders_created"
