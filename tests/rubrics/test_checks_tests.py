from __future__ import annotations

import pytest
from pydantic import ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import get_check, run_check, validate_config

RESULTS = {
    "tests/test_totals.py::test_half_cent": "PASSED",
    "tests/test_totals.py::test_rounding": "xfail",
    "tests/test_io.py::test_read": "PASSED",
    "tests/test_io.py::test_slow": "SKIPPED",
    "tests/test_io.py::test_write": "FAILED",
    "tests/test_io.py::test_flaky": "XPASS",
}


def run(**config):
    return run_check("tests", config, make_trajectory(tests=RESULTS))


def test_fail_to_pass_accepts_passed_and_xfail_only():
    assert run(fail_to_pass=["tests/test_totals.py::test_half_cent", "tests/test_totals.py::test_rounding"]).met
    outcome = run(fail_to_pass=["tests/test_io.py::test_slow"])
    assert not outcome.met and outcome.evidence == "1 of 1 tests failing: tests/test_io.py::test_slow (SKIPPED)"


def test_pass_to_pass_also_accepts_skipped():
    outcome = run(pass_to_pass=["tests/test_io.py::test_read", "tests/test_io.py::test_slow"])
    assert outcome.met and outcome.evidence == "all tests pass (0 fail_to_pass, 2 pass_to_pass)"
    assert not run(pass_to_pass=["tests/test_io.py::test_flaky"]).met


def test_missing_ids_fail_and_evidence_lists_every_failing_id():
    outcome = run(
        fail_to_pass="tests/test_totals.py::test_half_cent",
        pass_to_pass=["tests/test_io.py::test_write", "tests/test_io.py::test_gone"],
    )
    assert not outcome.met
    assert outcome.evidence == "2 of 3 tests failing: tests/test_io.py::test_write (FAILED), tests/test_io.py::test_gone (missing)"
    outcome = run_check("tests", {"fail_to_pass": ["a"]}, make_trajectory())
    assert outcome.evidence == "1 of 1 tests failing: a (missing); state.tests is empty"


def test_config_and_lint():
    with pytest.raises(ValidationError, match="must not be empty"):
        validate_config("tests", {"fail_to_pass": [""]})
    spec = get_check("tests")
    assert [c for _, c, _ in spec.lint(spec.config_model.model_validate({}))] == ["empty-check"]
    both = spec.config_model.model_validate({"fail_to_pass": ["a"], "pass_to_pass": ["a"]})
    assert [c for _, c, _ in spec.lint(both)] == ["duplicate-test-id"]
