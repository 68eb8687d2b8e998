"""Passes before and after the fix: the change must not break these."""
from logscan.match import PATTERN


def test_pass_to_pass_1():
    import re
    assert re.match(PATTERN, "aaa")
