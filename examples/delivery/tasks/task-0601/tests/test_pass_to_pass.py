"""Passes before and after the fix: the change must not break these."""
from orders_api.listing import customer_ids_to_fetch


def test_pass_to_pass_1():
    assert customer_ids_to_fetch([]) == []
