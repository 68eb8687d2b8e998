"""Passes before and after the fix: the change must not break these."""
from taxcalc.gst import gst_for


def test_pass_to_pass_1():
    assert gst_for(100.0, "standard") == 18.0
