"""Code checks: one family per module, looked up by key through the registry."""

from rubrics.checks.base import CheckConfig, CheckError, CheckOutcome, CheckSpec, LintProblem
from rubrics.checks.registry import (
    ENTRY_POINT_GROUP,
    UnknownCheckError,
    check_keys,
    get_check,
    is_check_key,
    lint_check,
    run_check,
    run_config,
    validate_config,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "CheckConfig",
    "CheckError",
    "CheckOutcome",
    "CheckSpec",
    "LintProblem",
    "UnknownCheckError",
    "check_keys",
    "get_check",
    "is_check_key",
    "lint_check",
    "run_check",
    "run_config",
    "validate_config",
]
