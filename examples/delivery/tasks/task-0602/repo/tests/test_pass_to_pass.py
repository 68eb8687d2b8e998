"""Passes before and after the fix: the change must not break these."""
from csvexport.writer import to_csv


def test_pass_to_pass_1():
    assert to_csv([[1, 2], [3, 4]]) == "1,2\n3,4\n"
