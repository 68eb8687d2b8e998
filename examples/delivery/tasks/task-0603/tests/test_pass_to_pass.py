"""Passes before and after the fix: the change must not break these."""
from pricecache.cache import cache_key


def test_pass_to_pass_1():
    assert cache_key(7, "EUR") == cache_key(7, "EUR")
