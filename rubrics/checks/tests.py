"""The `tests` check (SWE-bench style): fail_to_pass ids now pass, pass_to_pass ids still pass."""

from __future__ import annotations

from functools import cached_property

from pydantic import field_validator

from rubrics.checks.base import WARNING, CheckConfig, CheckOutcome, LintProblem, as_list
from rubrics.trajectory import Trajectory

FAIL_TO_PASS_OK = frozenset({"PASSED", "XFAIL"})
PASS_TO_PASS_OK = frozenset({"PASSED", "XFAIL", "SKIPPED"})
MISSING = "missing"

# Spellings that test runners and harnesses use for the same outcomes.
_SYNONYMS = {
    "PASS": "PASSED", "OK": "PASSED", "FAIL": "FAILED", "SKIP": "SKIPPED",
    "XFAILED": "XFAIL", "XPASSED": "XPASS", "ERRORED": "ERROR",
}  # fmt: skip


def normalize_status(status: str) -> str:
    upper = status.strip().upper()
    return _SYNONYMS.get(upper, upper)


class TestsConfig(CheckConfig):
    __test__ = False  # not a pytest test class despite the name

    fail_to_pass: str | list[str] = []
    pass_to_pass: str | list[str] = []

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _no_blank_ids(cls, value: str | list[str]) -> str | list[str]:
        if any(not test_id.strip() for test_id in as_list(value)):
            raise ValueError("test ids must not be empty")
        return value

    @cached_property
    def expectations(self) -> list[tuple[str, frozenset[str]]]:
        return [(t, FAIL_TO_PASS_OK) for t in as_list(self.fail_to_pass)] + [
            (t, PASS_TO_PASS_OK) for t in as_list(self.pass_to_pass)
        ]


class TestsCheck:
    __test__ = False
    key = "tests"
    config_model = TestsConfig

    def run(self, config: TestsConfig, trajectory: Trajectory) -> CheckOutcome:
        results = trajectory.cached(
            "tests_normalized", lambda: {k: normalize_status(v) for k, v in trajectory.state.tests.items()}
        )
        failing = []
        for test_id, accepted in config.expectations:
            status = results.get(test_id, MISSING)
            if status not in accepted:
                failing.append(f"{test_id} ({status})")
        counts = f"{len(as_list(config.fail_to_pass))} fail_to_pass, {len(as_list(config.pass_to_pass))} pass_to_pass"
        if not failing:
            return CheckOutcome(True, f"all tests pass ({counts})")
        empty = "; state.tests is empty" if not results else ""
        shown = ", ".join(failing[:5]) + (f" and {len(failing) - 5} more" if len(failing) > 5 else "")
        return CheckOutcome(False, f"{len(failing)} of {len(config.expectations)} tests failing: {shown}{empty}")

    def lint(self, config: TestsConfig) -> list[LintProblem]:
        problems = []
        if not config.expectations:
            message = "tests: neither fail_to_pass nor pass_to_pass lists a test; always met"
            problems.append((WARNING, "empty-check", message))
        duplicated = set(as_list(config.fail_to_pass)) & set(as_list(config.pass_to_pass))
        if duplicated:
            problems.append((WARNING, "duplicate-test-id", f"tests: in both lists: {', '.join(sorted(duplicated))}"))
        return problems


TESTS = TestsCheck()
