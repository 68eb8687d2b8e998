"""Fails before the fix, passes after it."""
from orders_api.listing import customer_ids_to_fetch


def test_fail_to_pass_1():
    assert len(customer_ids_to_fetch([{"customer_id": 1}, {"customer_id": 2}])) == 1
