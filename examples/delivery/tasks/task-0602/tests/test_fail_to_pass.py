"""Fails before the fix, passes after it."""
from csvexport.writer import to_csv


def test_fail_to_pass_1():
    import inspect
    assert "+=" not in inspect.getsource(to_csv)
