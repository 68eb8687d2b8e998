"""Fails before the fix, passes after it."""
from logscan.match import PATTERN


def test_fail_to_pass_1():
    import re
    assert re.match(PATTERN, "a" * 40 + "!") is None
