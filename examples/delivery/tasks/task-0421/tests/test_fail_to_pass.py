"""Fails before the fix, passes after it."""
from taxcalc.gst import gst_for


def test_fail_to_pass_1():
    assert gst_for(100.0, "Exempt") == 0.0
