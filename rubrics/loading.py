"""Line-aware YAML: plain Python data plus a SourceMap from field path to (line, col).

PyYAML's constructors drop positions, so we compose the node graph (which keeps marks) and build the
data ourselves, recording each node's position under its field path. Everything unusual in the text
(syntax errors, duplicate keys, recursive aliases, unsafe tags) becomes a Problem, never a traceback.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from rubrics.problems import ERROR, Problem, RubricError, format_path

MAX_DEPTH = 100
PLAIN_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


class PositionLoader(yaml.SafeLoader):
    """SafeLoader: a rubric file can never construct Python objects."""


@dataclass
class SourceMap:
    values: dict[tuple, tuple[int, int]] = field(default_factory=dict)  # path -> where the value starts
    keys: dict[tuple, tuple[int, int]] = field(default_factory=dict)    # path -> where its mapping key is

    def locate(self, path: tuple, at_key: bool = False) -> tuple[int, int]:
        """Position of the field, else of its nearest ancestor that has one, else (0, 0)."""
        path = tuple(path)
        while True:
            if at_key and path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
            if not path:
                return (0, 0)
            path = path[:-1]

    def problem(self, path: tuple, message: str, code: str, severity: str = ERROR,
                at_key: bool = False) -> Problem:
        line, col = self.locate(path, at_key)
        return Problem(format_path(path), line, col, severity, message, code)


class _Builder:
    def __init__(self, loader: PositionLoader):
        self.loader = loader
        self.source_map = SourceMap()
        self.problems: list[Problem] = []
        self._active: set[int] = set()   # ids of nodes on the current path, to catch recursive aliases

    def build(self, node: yaml.Node, path: tuple):
        self.source_map.values[path] = _mark(node)
        if id(node) in self._active or len(path) > MAX_DEPTH:
            self.problems.append(self.source_map.problem(path, "recursive alias or nesting too deep", "yaml-syntax"))
            return None
        if not isinstance(node, yaml.ScalarNode) and node.tag not in PLAIN_COLLECTION_TAGS:
            # Scalars go through SafeLoader, which refuses unknown tags; collections we build ourselves.
            self.problems.append(self.source_map.problem(path, f"unsupported YAML tag '{node.tag}'", "yaml-syntax"))
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                return [self.build(child, path + (i,)) for i, child in enumerate(node.value)]
            return self.loader.construct_object(node, deep=True)
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: tuple) -> dict:
        self.loader.flatten_mapping(node)   # resolves `<<` merge keys
        out: dict = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(Problem(format_path(path), *_mark(key_node), ERROR,
                                             "mapping keys must be plain scalars", "yaml-syntax"))
                continue
            key = self.loader.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key) if not isinstance(key, bool) else str(key).lower()
            child = path + (key,)
            if key in out:
                self.problems.append(Problem(format_path(child), *_mark(key_node), ERROR,
                                             f"duplicate key '{key}' (the later value would win silently)",
                                             "duplicate-key"))
                continue
            self.source_map.keys[child] = _mark(key_node)
            out[key] = self.build(value_node, child)
        return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def parse_yaml(text: str) -> tuple[object, SourceMap, list[Problem]]:
    """Parse one YAML document. Returns (data, source_map, problems); data is None when unreadable."""
    loader = None
    try:
        loader = PositionLoader(text)   # the reader rejects control characters here already
        node = loader.get_single_node()
        if node is None:
            return None, SourceMap(), [Problem("", 1, 1, ERROR, "the file is empty", "yaml-syntax")]
        builder = _Builder(loader)
        data = builder.build(node, ())
        return data, builder.source_map, builder.problems
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = " ".join(str(part) for part in (exc.context, exc.problem) if part) or "invalid YAML"
        return None, SourceMap(), [Problem("", line, col, ERROR, message, "yaml-syntax")]
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        col = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        char = f"U+{exc.character:04X}" if isinstance(exc.character, int) else repr(exc.character)
        message = f"character {char} is not allowed in YAML ({exc.reason})"
        return None, SourceMap(), [Problem("", line, col, ERROR, message, "yaml-syntax")]
    except yaml.YAMLError as exc:
        return None, SourceMap(), [Problem("", 1, 1, ERROR, str(exc), "yaml-syntax")]
    except (ValueError, OverflowError, RecursionError) as exc:
        # e.g. a scalar the safe constructor cannot convert, such as an out-of-range timestamp
        return None, SourceMap(), [Problem("", 1, 1, ERROR, f"unreadable YAML value: {exc}", "yaml-syntax")]
    finally:
        if loader is not None:
            loader.dispose()


def read_rubric(src) -> tuple[object, SourceMap, list[Problem], str]:
    """(data, source_map, problems, source name) for a path, YAML text or dict."""
    from pathlib import Path

    if isinstance(src, dict):
        return src, SourceMap(), [], "<dict>"
    if isinstance(src, Path) or (isinstance(src, str) and _looks_like_path(src)):
        path = Path(src)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return None, SourceMap(), [Problem("", 1, 1, ERROR, f"cannot read the file: {exc}", "io-error")], str(src)
        return (*parse_yaml(text), str(src))
    if isinstance(src, str):
        return (*parse_yaml(src), "<text>")
    raise TypeError(f"a rubric is a path, YAML text, dict or Rubric, not {type(src).__name__}")


def _looks_like_path(text: str) -> bool:
    from pathlib import Path

    if "\n" in text or ": " in text or text.strip() != text or not text:
        return False
    return text.endswith((".yaml", ".yml")) or Path(text).is_file()


def analyze_rubric(src):
    """(Rubric or None, every problem found, source name); never raises for bad rubric content."""
    from rubrics.validation import validate_rubric

    data, source_map, problems, source = read_rubric(src)
    if data is None and problems:
        return None, problems, source
    rubric, found = validate_rubric(data, source_map, source)
    problems = sorted(set(problems + found), key=lambda p: (p.line, p.col, p.path, p.code))
    if any(p.severity == ERROR for p in problems):
        rubric = None
    return rubric, problems, source


def load_rubric(src):
    """A Rubric from a path, YAML text, dict or Rubric; raises RubricError listing every error."""
    from rubrics.model import Rubric

    if isinstance(src, Rubric):
        return src
    rubric, problems, source = analyze_rubric(src)
    if rubric is None:
        raise RubricError(source, [p for p in problems if p.severity == ERROR])
    return rubric
