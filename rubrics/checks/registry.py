"""Check keys: the built-ins and those that installed packages add through the entry-point group
`rubrics.checks` (each entry point names a CheckSpec instance; its name is the key)."""

from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pydantic import BaseModel

from rubrics.checks.base import CheckError, CheckOutcome, CheckSpec
from rubrics.trajectory import Trajectory, load_trajectory

ENTRY_POINT_GROUP = "rubrics.checks"

# key -> "module:attribute"; imported on first use so that `import rubrics` stays cheap.
_BUILTINS = {
    "email_sent": "rubrics.checks.email:EMAIL_SENT",
    "number": "rubrics.checks.numbers:NUMBER",
    "contains": "rubrics.checks.text:CONTAINS",
    "regex": "rubrics.checks.text:REGEX",
    "tool_called": "rubrics.checks.tools:TOOL_CALLED",
    "tool_sequence": "rubrics.checks.sequence:TOOL_SEQUENCE",
    "file": "rubrics.checks.files:FILE",
    "json": "rubrics.checks.json_path:JSON",
    "tests": "rubrics.checks.tests:TESTS",
    "all_of": "rubrics.checks.combinators:ALL_OF",
    "any_of": "rubrics.checks.combinators:ANY_OF",
    "not": "rubrics.checks.combinators:NOT",
}

# Item fields that are not check keys; a custom check cannot take these names.
RESERVED_KEYS = frozenset({"judge", "id", "text", "points", "evidence"})


class UnknownCheckError(CheckError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _entry_points() -> list[Any]:
    """The installed entry points of the group; tests replace this lookup."""
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


@functools.cache
def _builtin(key: str) -> CheckSpec:
    module_name, attribute = _BUILTINS[key].split(":")
    return getattr(importlib.import_module(module_name), attribute)


@functools.cache
def _plugins() -> dict[str, Any]:
    """Entry points by key, not yet loaded: a broken plugin only fails the rubrics that use its key."""
    found: dict[str, Any] = {}
    for entry_point in _entry_points():
        if entry_point.name not in _BUILTINS and entry_point.name not in RESERVED_KEYS:
            found.setdefault(entry_point.name, entry_point)
    return found


@functools.cache
def _load_plugin(key: str) -> CheckSpec:
    entry_point = _plugins()[key]
    try:
        spec = entry_point.load()
    except Exception as error:  # any import failure of third-party code
        raise CheckError(f"check {key!r}: cannot load entry point {entry_point.value!r}: {error}") from error
    if isinstance(spec, type):
        spec = spec()
    if not isinstance(spec, CheckSpec) or not _is_model(getattr(spec, "config_model", None)):
        raise CheckError(
            f"check {key!r}: entry point {entry_point.value!r} is not a CheckSpec (key, config_model, run, lint)"
        )
    if spec.key != key:
        raise CheckError(f"check {key!r}: entry point {entry_point.value!r} declares key {spec.key!r}")
    return spec


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def reset_plugins() -> None:
    """Forgets discovered entry points (after installing a package at run time, and in tests)."""
    _plugins.cache_clear()
    _load_plugin.cache_clear()
    _RECENT.clear()


def check_keys() -> list[str]:
    return [*_BUILTINS, *sorted(_plugins())]


def is_check_key(key: str) -> bool:
    return key in _BUILTINS or key in _plugins()


def get_check(key: str) -> CheckSpec:
    if key in _BUILTINS:
        return _builtin(key)
    if key in _plugins():
        return _load_plugin(key)
    hint = " (judge is compiled to a judge request, not a code check)" if key == "judge" else ""
    raise UnknownCheckError(f"unknown check key {key!r}{hint}; known: {', '.join(check_keys())}")


def validate_config(key: str, raw_config: Any) -> BaseModel:
    """The validated config of `key`; raises pydantic.ValidationError for an invalid one."""
    return get_check(key).config_model.model_validate(raw_config)


_CANONICAL_JSON = json.JSONEncoder(sort_keys=True)
_RECENT: dict[tuple[str, int], tuple[Any, Any, BaseModel]] = {}  # (key, id(raw)) -> (raw, snapshot, config)
_RECENT_LIMIT = 4096


def _cached_config(key: str, raw_config: Any) -> BaseModel:
    """run_check validates a config (and compiles its regexes, cached on the config) once per mapping, not per
    trajectory: a caller passes the same mapping for every trajectory (benchmarks/checks_run.py). The snapshot
    comparison keeps a mapping edited in place from reusing a stale config."""
    recent = _RECENT.get((key, id(raw_config)))
    if recent is not None and recent[0] is raw_config and recent[1] == raw_config:
        return recent[2]
    config = validate_config(key, raw_config)
    try:
        snapshot = json.loads(_CANONICAL_JSON.encode(raw_config))
    except (TypeError, ValueError):
        return config
    if len(_RECENT) >= _RECENT_LIMIT:
        _RECENT.clear()
    _RECENT[(key, id(raw_config))] = (raw_config, snapshot, config)
    return config


@dataclass(frozen=True)
class CheckFailure:
    """Why a check gave no outcome: `error` is the CheckError it raised (or the one saying what it returned
    instead of a CheckOutcome), or, when `crashed`, the other exception it raised (a bug in the check)."""
    key: str
    error: Exception
    crashed: bool = False


def attempt_check(key: str, config: BaseModel, trajectory: Trajectory,
                  spec: CheckSpec | None = None) -> CheckOutcome | CheckFailure:
    """The one place a check runs (`spec`, default the check of `key`, on an already validated config): its
    outcome, or a CheckFailure; a bug in a check must fail one item, not the batch."""
    try:
        outcome = (spec if spec is not None else get_check(key)).run(config, trajectory)
    except CheckError as error:
        return CheckFailure(key, error)
    except Exception as error:  # any exception of a check's own code
        return CheckFailure(key, error, crashed=True)
    if not isinstance(outcome, CheckOutcome):
        return CheckFailure(key, CheckError(f"check {key!r} returned {type(outcome).__name__}, not a CheckOutcome"))
    return outcome


def run_config(key: str, config: BaseModel, trajectory: Trajectory) -> CheckOutcome:
    """Runs an already validated config; anything but a CheckError from the check becomes a CheckError."""
    outcome = attempt_check(key, config, trajectory)
    if isinstance(outcome, CheckFailure) and outcome.crashed:
        error = outcome.error
        raise CheckError(f"check {key!r} crashed: {type(error).__name__}: {error}") from error
    if isinstance(outcome, CheckFailure):
        raise outcome.error
    return outcome


def run_check(key: str, raw_config: Any, trajectory: Trajectory | dict | str) -> CheckOutcome:
    """Validates `raw_config` for `key` (pydantic.ValidationError if invalid) and runs it on `trajectory`."""
    if not isinstance(trajectory, Trajectory):
        trajectory = load_trajectory(trajectory)
    config = validate_config(key, raw_config) if key not in _BUILTINS else _cached_config(key, raw_config)
    return run_config(key, config, trajectory)


def lint_check(key: str, config: BaseModel) -> list[tuple[str, str, str]]:
    try:
        return list(get_check(key).lint(config))
    except CheckError:
        raise
    except Exception as error:
        raise CheckError(f"check {key!r}: lint crashed: {type(error).__name__}: {error}") from error
