"""HealthBench rows -> a rubric and a trajectory each, plus a dataset file that pairs them.

A row, as published (simple-evals' healthbench_eval.py reads the same fields):
    {"prompt": [{"role", "content"}...], "rubrics": [{"criterion", "points", "tags"}...], "example_tags": [...],
     "prompt_id": "...", "ideal_completions_data": {...} | null, ...}
The completion to grade comes from a column of the row (`completion` by default; a dotted path such as
`ideal_completions_data.ideal_completion` reaches inside), or from a second JSONL file of
{"prompt_id", "completion"} lines. A completion is text or a list of messages (simple-evals writes
`[{"role": "assistant", "content": ...}]`). Each criterion becomes a judge criterion with its points and tags; the
judge sees the whole transcript, as HealthBench's grader sees the conversation with the completion.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

TASK = "Reply to the user's last message in this health conversation."
MAX_NAME = 100


class RowError(ValueError):
    """A row that cannot be imported; the message names the field."""


@dataclass(frozen=True)
class Example:
    name: str               # file stem, unique in the import
    rubric: dict[str, Any]
    trajectory: dict[str, Any]


@dataclass
class ImportReport:
    examples: list[Example] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # "file:line: error: field X: why"


def _lookup(row: dict, column: str) -> Any:
    value: Any = row
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def completion_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        texts = [m.get("content") for m in value if m.get("role", "assistant") == "assistant"]
        if texts and all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise RowError(f"field {where}: expected the completion as text or a list of assistant messages, "
                   f"got {type(value).__name__}")


def _points(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value in (0, 0.0):
        raise RowError(f"field {where}: expected non-zero integer points, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise RowError(f"field {where}: points {value!r} are not whole; the rubric format takes integers")
    return int(value)


def convert_row(row: Any, completion: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(rubric dict, trajectory dict) of one row and its completion; RowError names the field that is wrong."""
    from rubrics.rubric.spec import TAG_PATTERN

    if not isinstance(row, dict):
        raise RowError(f"expected a JSON object, got {type(row).__name__}")
    prompt_id = row.get("prompt_id")
    if not isinstance(prompt_id, str) or not prompt_id:
        raise RowError("field prompt_id: expected non-empty text")
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise RowError("field prompt: expected a non-empty list of messages")
    for index, message in enumerate(prompt):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content"), str):
            raise RowError(f"field prompt[{index}]: expected {{role, content}} with text content")
    items = row.get("rubrics")
    if not isinstance(items, list) or not items:
        raise RowError("field rubrics: expected a non-empty list of {criterion, points, tags}")
    criteria = []
    for index, item in enumerate(items):
        where = f"rubrics[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("criterion"), str) or not item["criterion"].strip():
            raise RowError(f"field {where}.criterion: expected non-empty text")
        tags = item.get("tags") or []
        if not isinstance(tags, list):
            raise RowError(f"field {where}.tags: expected a list")
        for t, tag in enumerate(tags):
            if not isinstance(tag, str) or not re.match(TAG_PATTERN, tag):
                raise RowError(f"field {where}.tags[{t}]: {tag!r} is not a tag (letters, digits and _.:/+-)")
        criteria.append({"id": f"c{index + 1}", "points": _points(item.get("points"), f"{where}.points"),
                         **({"tags": list(dict.fromkeys(tags))} if tags else {}), "judge": item["criterion"]})
    if not any(c["points"] > 0 for c in criteria):
        raise RowError("field rubrics: no criterion has positive points, so no score can be computed")
    example_tags = row.get("example_tags") or []
    if not isinstance(example_tags, list) or not all(isinstance(t, str) for t in example_tags):
        raise RowError("field example_tags: expected a list of text")
    rubric = {"version": 1, "id": f"healthbench-{safe_name(prompt_id)}", "task": TASK,
              "judge": {"evidence": ["transcript"]}, "criteria": criteria}
    trajectory = {"id": prompt_id, "task_id": prompt_id,
                  "messages": [{"role": m["role"], "content": m["content"]} for m in prompt]
                  + [{"role": "assistant", "content": completion}],
                  "final_answer": completion,
                  "metadata": {"source": "healthbench", "example_tags": example_tags}}
    return rubric, trajectory


def safe_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:MAX_NAME]
    return name if name and name[0].isalnum() else f"x{name}"[:MAX_NAME] or "example"


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value or the JSONTextError) of each non-blank line."""
    from rubrics.trajectory.json_text import JSONTextError, loads, text_lines

    for line in text_lines(path.read_bytes().removeprefix(b"\xef\xbb\xbf")):
        if line.error is not None:
            yield line.number, line.error
        elif not line.blank:
            try:
                yield line.number, loads(line.text)
            except JSONTextError as exc:
                yield line.number, exc


def read_completions(path: Path, errors: list[str]) -> dict[str, str]:
    completions: dict[str, str] = {}
    for number, row in _jsonl(path):
        where = f"{path}:{number}"
        if isinstance(row, Exception):
            errors.append(f"{where}: error: {row}")
            continue
        if not isinstance(row, dict) or not isinstance(row.get("prompt_id"), str):
            errors.append(f"{where}: error: field prompt_id: expected an object with a prompt_id")
            continue
        try:
            completions[row["prompt_id"]] = completion_text(row.get("completion"), "completion")
        except RowError as exc:
            errors.append(f"{where}: error: {exc}")
    return completions


def import_healthbench(source: Path, completions: Path | None = None, column: str = "completion") -> ImportReport:
    """Every usable row of `source` as an Example; each bad row is one error line naming file:line and field."""
    from rubrics.rubric.load import load_rubric
    from rubrics.rubric.problems import RubricError

    report = ImportReport()
    by_id = read_completions(completions, report.errors) if completions is not None else None
    used: set[str] = set()
    for number, row in _jsonl(source):
        where = f"{source}:{number}"
        if isinstance(row, Exception):
            report.errors.append(f"{where}: error: {row}")
            continue
        try:
            prompt_id = row.get("prompt_id") if isinstance(row, dict) else None
            if by_id is not None:
                if prompt_id not in by_id:
                    raise RowError(f"field prompt_id: {prompt_id!r} has no completion in {completions}")
                completion = by_id[prompt_id]
            else:
                value = _lookup(row, column) if isinstance(row, dict) else None
                if value is None:
                    raise RowError(f"field {column}: missing (give --completions FILE or --completion-column)")
                completion = completion_text(value, column)
            rubric, trajectory = convert_row(row, completion)
            load_rubric(rubric)   # what grading will load: refuse it here, at its row
        except RowError as exc:
            report.errors.append(f"{where}: error: {exc}")
            continue
        except RubricError as exc:
            report.errors.append(f"{where}: error: {' | '.join(p.format('rubric') for p in exc.problems[:3])}")
            continue
        name, n = safe_name(prompt_id), 2
        while name in used:   # the same prompt twice (repeats): each keeps its own files
            name, n = f"{safe_name(prompt_id)}-{n}", n + 1
        used.add(name)
        report.examples.append(Example(name, rubric, {**trajectory, "id": name if n > 2 else trajectory["id"]}))
    return report


def write_examples(examples: list[Example], outdir: Path) -> Path:
    """rubrics/NAME.yaml, trajectories/NAME.json and dataset.jsonl (the pairs, paths relative to it)."""
    import yaml

    (outdir / "rubrics").mkdir(parents=True, exist_ok=True)
    (outdir / "trajectories").mkdir(parents=True, exist_ok=True)
    lines = []
    for example in examples:
        rubric_path = outdir / "rubrics" / f"{example.name}.yaml"
        rubric_path.write_text(yaml.safe_dump(example.rubric, sort_keys=False, allow_unicode=True, width=120),
                               encoding="utf-8")
        trajectory_path = outdir / "trajectories" / f"{example.name}.json"
        trajectory_path.write_text(json.dumps(example.trajectory, ensure_ascii=False, indent=1) + "\n",
                                   encoding="utf-8")
        lines.append(json.dumps({"trajectory": f"trajectories/{example.name}.json",
                                 "rubric": f"rubrics/{example.name}.yaml"}))
    dataset = outdir / "dataset.jsonl"
    dataset.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return dataset
