from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError
from trajectory_factory import make_trajectory

from rubrics.checks import CheckError, CheckOutcome, UnknownCheckError, check_keys, get_check, registry, run_check

BUILTINS = ["email_sent", "number", "contains", "regex", "tool_called", "tool_sequence", "file", "json", "tests", "all_of", "any_of", "not"]


@pytest.fixture(autouse=True)
def fresh_plugins():
    registry.reset_plugins()
    yield
    registry.reset_plugins()


def test_builtin_keys():
    assert check_keys()[: len(BUILTINS)] == BUILTINS
    for key in BUILTINS:
        spec = get_check(key)
        assert spec.key == key and issubclass(spec.config_model, BaseModel)


def test_unknown_key_is_a_check_error_and_a_key_error():
    with pytest.raises(UnknownCheckError, match="unknown check key 'emails_sent'; known: email_sent"):
        get_check("emails_sent")
    with pytest.raises(KeyError):
        get_check("judge")
    with pytest.raises(CheckError):
        run_check("nope", {}, make_trajectory())


def test_invalid_config_raises_validation_error():
    with pytest.raises(ValidationError):
        run_check("contains", {"txt": "x"}, make_trajectory(final_answer="x"))


class LengthConfig(BaseModel):
    max: int


@dataclass
class LengthCheck:
    key: str = "max_length"
    config_model: type = LengthConfig

    def run(self, config, trajectory):
        length = len(trajectory.final_text())
        return CheckOutcome(length <= config.max, f"{length} chars (max {config.max})")

    def lint(self, config):
        return []


class FakeEntryPoint:
    def __init__(self, name, value, obj):
        self.name, self.value, self.obj = name, value, obj

    def load(self):
        if isinstance(self.obj, Exception):
            raise self.obj
        return self.obj


def test_entry_point_lookup_is_lazy_and_used(monkeypatch):
    loaded = []

    class Recording(FakeEntryPoint):
        def load(self):
            loaded.append(self.name)
            return super().load()

    monkeypatch.setattr(
        registry,
        "_entry_points",
        lambda: [
            Recording("max_length", "demo:LENGTH", LengthCheck()),
            Recording("broken", "demo:BROKEN", ImportError("no module named demo")),
            Recording("contains", "demo:SHADOW", LengthCheck(key="contains")),  # built-ins cannot be replaced
        ],
    )
    assert check_keys()[-2:] == ["broken", "max_length"]
    assert loaded == []  # listing keys imports nothing
    outcome = run_check("max_length", {"max": 10}, make_trajectory(final_answer="short"))
    assert outcome == CheckOutcome(True, "5 chars (max 10)")
    assert loaded == ["max_length"]
    with pytest.raises(CheckError, match="cannot load entry point 'demo:BROKEN': no module named demo"):
        get_check("broken")
    assert get_check("contains") is not None and get_check("contains").key == "contains"
    assert "SHADOW" not in repr(get_check("contains"))


def test_entry_point_that_is_not_a_check(monkeypatch):
    monkeypatch.setattr(registry, "_entry_points", lambda: [FakeEntryPoint("odd", "demo:ODD", object())])
    with pytest.raises(CheckError, match="is not a CheckSpec"):
        get_check("odd")


def test_crashing_custom_check_becomes_a_check_error(monkeypatch):
    class Crashing(LengthCheck):
        def run(self, config, trajectory):
            raise ZeroDivisionError("boom")

    monkeypatch.setattr(registry, "_entry_points", lambda: [FakeEntryPoint("max_length", "demo:C", Crashing())])
    with pytest.raises(CheckError, match="check 'max_length' crashed: ZeroDivisionError: boom"):
        run_check("max_length", {"max": 1}, make_trajectory())


def test_entry_point_from_an_installed_distribution(tmp_path: Path, monkeypatch):
    """A real package on sys.path with a dist-info entry_points.txt, found through importlib.metadata."""
    package = tmp_path / "rubrics_wordcount_demo"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel, ConfigDict
            from rubrics.checks import CheckOutcome

            class WordCountConfig(BaseModel):
                model_config = ConfigDict(extra="forbid")
                min: int

            class WordCount:
                key = "word_count"
                config_model = WordCountConfig

                def run(self, config, trajectory):
                    words = len(trajectory.final_text().split())
                    return CheckOutcome(words >= config.min, f"{words} words (min {config.min})")

                def lint(self, config):
                    return [("warning", "tiny-minimum", "min: below 2")] if config.min < 2 else []

            WORD_COUNT = WordCount()
            """
        )
    )
    dist_info = tmp_path / "rubrics_wordcount_demo-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: rubrics-wordcount-demo\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[rubrics.checks]\nword_count = rubrics_wordcount_demo:WORD_COUNT\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "rubrics_wordcount_demo", raising=False)
    registry.reset_plugins()

    assert "word_count" in check_keys()
    assert run_check("word_count", {"min": 3}, make_trajectory(final_answer="one two three")).met
    outcome = run_check("word_count", {"min": 5}, make_trajectory(final_answer="one two"))
    assert outcome == CheckOutcome(False, "2 words (min 5)")
    with pytest.raises(ValidationError):
        run_check("word_count", {"min": 1, "extra": True}, make_trajectory())
    # Custom checks work inside combinators too.
    assert run_check("not", {"word_count": {"min": 5}}, make_trajectory(final_answer="one")).met
