"""Validate parsed YAML data into a Rubric, collecting every problem with its position.

Structure (types, required fields, one check key per item) and the rules that make a rubric unusable
(duplicate ids, gate with points, ...) are both errors here, so `load_rubric` and `rubric lint` agree.
"""
from __future__ import annotations

from pathlib import Path

from typing import Any, Iterator

from pydantic import ValidationError

from rubrics.rubric import rules
from rubrics.rubric.source_map import SourceMap
from rubrics.rubric.spec import (JUDGE_ONLY_FIELDS, Item, ItemFields, JudgeOptions, Rubric, RubricHeader)
from rubrics.rubric.problems import ERROR, Problem
from rubrics.trajectory.selectors import SELECTOR_HINTS
from rubrics.wording import did_you_mean

JUDGE_KEY = "judge"
COMBINATOR_LIST_KEYS = ("all_of", "any_of")
COMBINATOR_ONE_KEY = "not"
COMBINATORS = (*COMBINATOR_LIST_KEYS, COMBINATOR_ONE_KEY)


def check_keys() -> list[str]:
    from rubrics.checks.registry import check_keys as registered
    return [JUDGE_KEY] + [key for key in registered() if key != JUDGE_KEY]


def field_names(model) -> list[str]:
    """The names a user writes: aliases where a field has one (`in` for `in_`)."""
    return [info.alias or name for name, info in getattr(model, "model_fields", {}).items()]


def comma_hint(key: str, value: Any) -> str:
    """`{judge: one page, readable by a CFO}` reads as a key 'readable by a CFO' with no value: a key with a
    space and no value is almost always prose that a comma split, at any depth ({...} under file:, judge:)."""
    if value is None and " " in key:
        return "; a comma ends a value inside {...}: quote the previous value if it contains one"
    return ""


def pydantic_problems(exc: ValidationError, base: tuple, smap: SourceMap, allowed=(), data: Any = None) -> list[Problem]:
    """Problems for pydantic errors, located at the failing field (or at the key, for unknown keys).

    pydantic adds union members to the location ("text", "str"); those are dropped, and the errors of
    one field are merged ("Input should be a valid string or Input should be a valid list")."""
    merged: dict[tuple, list[str]] = {}
    problems = []
    for err in exc.errors(include_url=False):
        loc = _data_path(data, err["loc"]) if data is not None else tuple(err["loc"])
        path = base + loc
        if err["type"] == "extra_forbidden" and loc:
            name = str(loc[-1])
            hint = did_you_mean(name, allowed) + comma_hint(name, err.get("input"))
            problems.append(smap.problem(path, f"unknown key '{name}'{hint}", "unknown-key", at_key=True))
        elif err["type"] == "missing" and loc:
            problems.append(smap.problem(path[:-1], f"missing required field '{path[-1]}'", "schema"))
        else:
            merged.setdefault(path, []).append(err)
    for path, errors in merged.items():
        problems.append(smap.problem(path, _message(errors), "schema"))
    return problems


def _data_path(data: Any, loc: tuple) -> tuple:
    """The part of a pydantic location that walks the data (the rest names union members and validators);
    a missing or unknown key at the end is kept, since that is what the error is about."""
    path = []
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        elif isinstance(data, dict) and isinstance(part, str):
            path.append(part)   # the missing or extra key itself
            break
        elif isinstance(part, str):
            continue            # a union member such as "list[str]"
        else:
            break
        path.append(part)
    return tuple(path)


def _message(errors: list[dict]) -> str:
    """"Input should be a valid string or a valid list (got 5)" for the errors of one field."""
    wanted = list(dict.fromkeys(err["msg"] for err in errors))
    text = wanted[0] + "".join(" or " + msg.removeprefix("Input should be ") for msg in wanted[1:])
    value = errors[0].get("input")
    shown = repr(value) if isinstance(value, (str, int, float, bool)) or value is None else type(value).__name__
    return f"{text} (got {shown[:60]})"


class RubricValidator:
    def __init__(self, smap: SourceMap, source: str):
        self.smap = smap
        self.source = source
        self.problems: list[Problem] = []
        self.keys = check_keys()

    def add(self, path: tuple, message: str, code: str, severity: str = ERROR, at_key: bool = False):
        self.problems.append(self.smap.problem(path, message, code, severity, at_key))

    def validate(self, data: Any) -> Rubric | None:
        if not isinstance(data, dict):
            self.add((), f"a rubric must be a mapping, got {type(data).__name__}", "schema")
            return None
        try:
            header = RubricHeader.model_validate(data)
        except ValidationError as exc:
            self.problems += pydantic_problems(exc, (), self.smap, RubricHeader.model_fields, data)
            header = None
        defaults = data.get("judge")
        if isinstance(defaults, dict) and isinstance(defaults.get("evidence"), list):
            self.check_selectors([s for s in defaults["evidence"] if isinstance(s, str)], ("judge", "evidence"))
        items = []
        for kind, section in (("gate", "gates"), ("criterion", "criteria")):
            raw_items = data.get(section) or []
            if isinstance(raw_items, list):
                items += [self.item(raw, kind, (section, i)) for i, raw in enumerate(raw_items)]
        items = [item for item in items if item is not None]
        if header is not None and header.judge is not None:
            self.check_judge_files(header.judge)
        for path, message, code, severity in rules.rubric_rules(data, items):
            self.add(path, message, code, severity)
        if header is None or any(p.severity == ERROR for p in self.problems):
            return None
        return Rubric(version=header.version, id=header.id, task=header.task, reference=header.reference,
                      judge=header.judge, source=self.source,
                      gates=tuple(i for i in items if i.kind == "gate"),
                      criteria=tuple(i for i in items if i.kind == "criterion"))

    def check_judge_files(self, judge: Any) -> None:
        """A file the rubric names (judge: calibration, head) lies inside the rubric's folder (its symlinks followed;
        the working directory for a rubric not read from a file) and, when it exists, is a regular file within
        MAX_JUDGE_FILE_BYTES: a rubric is data someone else may have written, and must not make the grader read
        /dev/zero, a FIFO or a file of the host's. A file that does not exist yet is the judge's error when built."""
        from rubrics.input_files import MAX_JUDGE_FILE_BYTES, InputFileError, check_input_file, confined

        base = Path(self.source).parent if self.source and not self.source.startswith("<") else Path.cwd()
        for field in ("calibration", "head"):
            name = getattr(judge, field, None)
            if not name:
                continue
            try:
                path = confined(base, name, what="the rubric's folder", hint="a rubric names only files beside it")
            except InputFileError as exc:
                self.add(("judge", field), f"judge.{field}: {exc}", "file-outside")
                continue
            except OSError as exc:   # a name the system refuses (too long, a loop of symlinks)
                self.add(("judge", field), f"judge.{field}: {name!r}: {exc.strerror or exc}", "io-error")
                continue
            try:
                if path.exists():
                    check_input_file(path, MAX_JUDGE_FILE_BYTES)
            except OSError as exc:   # InputFileError too: a FIFO, a device, a file too large
                self.add(("judge", field), f"judge.{field}: {exc}", "io-error")

    def item(self, raw: Any, kind: str, path: tuple) -> Item | None:
        if not isinstance(raw, dict):
            self.add(path, f"an item must be a mapping, got {type(raw).__name__}", "schema")
            return None
        before = len(self.problems)
        fields = set(ItemFields.model_fields)
        found = [key for key in raw if key in self.keys]
        unknown = [key for key in raw if key not in fields and key not in self.keys]
        for key in unknown:
            hint = did_you_mean(key, fields | set(self.keys)) + comma_hint(key, raw[key])
            self.add(path + (key,), f"unknown key '{key}'{hint}", "unknown-key", at_key=True)
        if not found and not unknown:   # with an unknown key, that key's message is the better hint
            self.add(path, "the item has no check key; give exactly one of: " + ", ".join(self.keys),
                     "missing-check")
        elif len(found) > 1:
            self.add(path + (found[1],), f"the item has {len(found)} check keys ({', '.join(found)}); "
                     "give exactly one, or combine them with all_of/any_of", "multiple-checks", at_key=True)
        parsed = self.item_fields(raw, path)
        config = self.check_config(found[0], raw[found[0]], path + (found[0],)) if found else None
        self.item_rules(raw, kind, path, found)
        if parsed is None or config is None or any(p.severity == ERROR for p in self.problems[before:]):
            return None
        return Item(id=parsed.id, kind=kind, text=parsed.text, points=parsed.points, check=found[0],
                    config=config, threshold=parsed.threshold,
                    evidence=tuple(parsed.evidence) if parsed.evidence is not None else None,
                    examples=tuple(parsed.examples or ()), tags=tuple(dict.fromkeys(parsed.tags or ())))

    def item_fields(self, raw: dict, path: tuple) -> ItemFields | None:
        known = {k: v for k, v in raw.items() if k in ItemFields.model_fields}
        try:
            parsed = ItemFields.model_validate(known)
        except ValidationError as exc:
            self.problems += pydantic_problems(exc, path, self.smap, data=known)
            return None
        if parsed.evidence:
            self.check_selectors(parsed.evidence, path + ("evidence",))
        return parsed

    def item_rules(self, raw: dict, kind: str, path: tuple, found: list[str]):
        points = raw.get("points")
        if kind == "gate" and "points" in raw:
            self.add(path + ("points",), "a gate has no points: it passes or zeroes the score; "
                     "move the item to criteria to give it points", "gate-points", at_key=True)
        if kind == "criterion" and "points" not in raw:
            self.add(path, "a criterion needs integer points (negative for a penalty)", "missing-points")
        if kind == "criterion" and points == 0 and not isinstance(points, bool):
            self.add(path + ("points",), "points must not be 0: the item could never change the score",
                     "zero-points")
        judge = raw.get(JUDGE_KEY)
        if isinstance(judge, dict) and "threshold" in judge and "threshold" in raw:
            self.add(path + ("threshold",), "threshold is given twice (here and under judge:); keep one",
                     "conflicting-option", at_key=True)
        if found and found[0] != JUDGE_KEY:
            for name in JUDGE_ONLY_FIELDS:
                if name in raw:
                    self.add(path + (name,), f"'{name}' applies to judge items only; this item's check is "
                             f"'{found[0]}'", "judge-option", at_key=True)

    def check_config(self, key: str, config: Any, path: tuple):
        """The config to keep on the item: JudgeOptions for judge, else the raw mapping once it validates."""
        if key == JUDGE_KEY:
            return self.judge_config(config, path)
        return config if self.check(key, config, path) else None

    def check(self, key: str, config: Any, path: tuple) -> bool:
        """Validate and lint one check; a combinator's children first, each at its own path, so that an
        error deep inside all_of points at the nested field rather than at the combinator."""
        if key not in self.keys or key == JUDGE_KEY:
            candidates = [k for k in self.keys if k != JUDGE_KEY]
            hint = " (judge cannot be nested in a combinator)" if key == JUDGE_KEY else did_you_mean(key, candidates)
            self.add(path, f"unknown check key '{key}'{hint}", "unknown-key", at_key=True)
            return False
        children = list(child_checks(key, config, path))
        results = [self.check(*child) for child in children]   # every child, not just up to the first failure
        if not all(results):
            return False
        return self.one_check(key, config, path, lint=key not in COMBINATORS)

    def one_check(self, key: str, config: Any, path: tuple, lint: bool = True) -> bool:
        from rubrics.checks.base import CheckError
        from rubrics.checks.registry import get_check, lint_check

        try:
            spec = get_check(key)
            parsed = spec.config_model.model_validate(config)
            findings = lint_check(key, parsed) if lint else []
        except ValidationError as exc:
            self.problems += pydantic_problems(exc, path, self.smap, field_names(spec.config_model), config)
            return False
        except CheckError as exc:   # a plugin that cannot be loaded or whose lint crashed
            self.add(path, str(exc), "check-error", at_key=True)
            return False
        for severity, code, message in findings:
            where, message = self.field_path(path, message)
            self.add(where, message, code, severity)
        return not any(severity == ERROR for severity, _, _ in findings)

    def field_path(self, path: tuple, message: str) -> tuple[tuple, str]:
        """Check lint messages start with the field name ("pattern: invalid regex ..."): point at that field
        (the printed field path then names it, so the prefix is dropped)."""
        field, sep, rest = message.partition(": ")
        if sep and path + (field,) in self.smap.values:
            return path + (field,), rest
        if sep and path and field == path[-1]:   # "email_sent: no field given" under email_sent
            return path, rest
        return path, message

    def check_selectors(self, selectors, path: tuple) -> bool:
        from rubrics.trajectory.selectors import is_valid_selector
        ok = True
        for i, selector in enumerate(selectors):
            if not is_valid_selector(selector):
                where = path + (i,) if path[-1] == "evidence" else path
                self.add(where, f"unknown selector '{selector}'{did_you_mean(selector, SELECTOR_HINTS)}; "
                         "use final_answer, assistant, transcript, emails, files, files.<path>, tool_calls "
                         "or state.<dotted.path>", "unknown-selector")
                ok = False
        return ok

    def judge_config(self, config: Any, path: tuple) -> JudgeOptions | None:
        if isinstance(config, str):
            config = {"text": config}
        if not isinstance(config, dict):
            self.add(path, f"judge takes the criterion text or a mapping with 'text', got {type(config).__name__}",
                     "schema")
            return None
        try:
            return JudgeOptions.model_validate(config)
        except ValidationError as exc:
            self.problems += pydantic_problems(exc, path, self.smap, JudgeOptions.model_fields, config)
            return None


def child_checks(key: str, config: Any, path: tuple) -> Iterator[tuple[str, Any, tuple]]:
    """The check mappings directly inside a combinator, each with its field path."""
    entries = []
    if key in COMBINATOR_LIST_KEYS and isinstance(config, list):
        entries = [(entry, path + (i,)) for i, entry in enumerate(config)]
    elif key == COMBINATOR_ONE_KEY:
        entries = [(config, path)]
    for entry, where in entries:
        if isinstance(entry, dict):
            for sub_key, sub_config in entry.items():
                yield sub_key, sub_config, where + (sub_key,)


def validate_rubric(data: Any, smap: SourceMap, source: str) -> tuple[Rubric | None, list[Problem]]:
    validator = RubricValidator(smap, source)
    rubric = validator.validate(data)
    problems = sorted(set(validator.problems), key=lambda p: (p.line, p.col, p.path, p.code))
    return rubric, problems
