"""Combinators over check mappings: `all_of: [CHECK...]`, `any_of: [CHECK...]`, `not: CHECK`.

A CHECK is a one-key mapping such as `{contains: {text: EXP-221}}`. Children are validated with the
config models of their keys when the combinator is validated, so errors surface at load time, not per
trajectory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, RootModel, ValidationError, field_validator

from rubrics.checks.base import CheckError, CheckOutcome, LintProblem
from rubrics.trajectory import Trajectory


@dataclass(frozen=True)
class BoundCheck:
    key: str
    config: BaseModel

    def run(self, trajectory: Trajectory) -> CheckOutcome:
        from rubrics.checks.registry import run_config  # the registry imports this module

        return run_config(self.key, self.config, trajectory)

    def lint(self) -> list[LintProblem]:
        from rubrics.checks.registry import lint_check

        return lint_check(self.key, self.config)


def bind(raw: Any, where: str) -> BoundCheck:
    """Validates one `{key: config}` mapping; raises ValueError naming where it sits."""
    from rubrics.checks.registry import get_check

    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError(f"{where}: expected a mapping with exactly one check key, like {{contains: {{text: ...}}}}")
    ((key, config),) = raw.items()
    try:
        spec = get_check(str(key))
    except CheckError as error:  # an unknown key (UnknownCheckError), or a custom check that fails to load
        raise ValueError(f"{where}: {error}") from None
    try:
        return BoundCheck(str(key), spec.config_model.model_validate(config))
    except ValidationError as error:
        located = [(".".join([f"{where}.{key}", *(str(p) for p in e["loc"])]), e["msg"]) for e in error.errors()[:3]]
        raise ValueError("; ".join(f"{field}: {message}" for field, message in located)) from None


def _bind_all(items: list[Any], key: str) -> list[BoundCheck]:
    if not items:
        raise ValueError(f"{key} needs at least one check")
    return [bind(item, f"[{index}]") for index, item in enumerate(items)]


class AllOfConfig(RootModel[list[Any]]):
    @field_validator("root")
    @classmethod
    def _children(cls, value: list[Any]) -> list[Any]:
        return _bind_all(value, "all_of")


class AnyOfConfig(RootModel[list[Any]]):
    @field_validator("root")
    @classmethod
    def _children(cls, value: list[Any]) -> list[Any]:
        return _bind_all(value, "any_of")


class NotConfig(RootModel[dict[str, Any]]):
    @field_validator("root")
    @classmethod
    def _child(cls, value: dict[str, Any]) -> Any:
        return bind(value, "not")


def _lint_children(key: str, children: list[BoundCheck]) -> list[LintProblem]:
    return [
        (severity, code, f"{key}[{index}].{child.key}: {message}")
        for index, child in enumerate(children)
        for severity, code, message in child.lint()
    ]


def _join(outcomes: list[tuple[BoundCheck, CheckOutcome]]) -> str:
    return "; ".join(f"{child.key}: {outcome.evidence}" for child, outcome in outcomes)


class AllOfCheck:
    key = "all_of"
    config_model = AllOfConfig

    def run(self, config: AllOfConfig, trajectory: Trajectory) -> CheckOutcome:
        outcomes = []
        for child in config.root:
            outcome = child.run(trajectory)
            outcomes.append((child, outcome))
            if not outcome.met:  # the first unmet child decides; later ones need not run
                return CheckOutcome(False, f"unmet {_join([(child, outcome)])}")
        return CheckOutcome(True, f"all {len(outcomes)} met: {_join(outcomes)}")

    def lint(self, config: AllOfConfig) -> list[LintProblem]:
        return _lint_children(self.key, config.root)


class AnyOfCheck:
    key = "any_of"
    config_model = AnyOfConfig

    def run(self, config: AnyOfConfig, trajectory: Trajectory) -> CheckOutcome:
        outcomes = []
        for child in config.root:
            outcome = child.run(trajectory)
            if outcome.met:
                return CheckOutcome(True, f"met {_join([(child, outcome)])}")
            outcomes.append((child, outcome))
        return CheckOutcome(False, f"none of {len(outcomes)} met: {_join(outcomes)}")

    def lint(self, config: AnyOfConfig) -> list[LintProblem]:
        return _lint_children(self.key, config.root)


class NotCheck:
    key = "not"
    config_model = NotConfig

    def run(self, config: NotConfig, trajectory: Trajectory) -> CheckOutcome:
        child: BoundCheck = config.root
        outcome = child.run(trajectory)
        return CheckOutcome(not outcome.met, f"negated {child.key}: {outcome.evidence}")

    def lint(self, config: NotConfig) -> list[LintProblem]:
        return [(s, c, f"not.{config.root.key}: {m}") for s, c, m in config.root.lint()]


ALL_OF = AllOfCheck()
ANY_OF = AnyOfCheck()
NOT = NotCheck()
