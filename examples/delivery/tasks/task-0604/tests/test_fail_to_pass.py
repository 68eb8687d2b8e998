"""Fails before the fix, passes after it."""
import re

from logscan.match import PATTERN


def test_fail_to_pass_1():
    # A quantified group inside a quantified group is what backtracks exponentially.
    assert not re.search(r"\([^)]*[+*]\)[+*]", PATTERN)

