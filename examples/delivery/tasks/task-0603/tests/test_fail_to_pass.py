"""Fails before the fix, passes after it."""
from pricecache.cache import cache_key


def test_fail_to_pass_1():
    assert cache_key(7, "EUR") != cache_key(7, "USD")
