"""Fails before the fix, passes after it."""
from fxrates.convert import convert


def test_fail_to_pass_1():
    assert convert(1_000_000, 0.0067004, 0.9107) == 6102.05
