"""Passes before and after the fix: the change must not break these."""
from fxrates.convert import convert


def test_pass_to_pass_1():
    assert convert(100, 1.0, 1.0) == 100.0
