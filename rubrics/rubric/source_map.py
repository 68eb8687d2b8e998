"""Line-aware YAML: plain Python data plus a SourceMap from field path to (line, col).

PyYAML's constructors drop positions, so we compose the node graph (which keeps marks) and build the
data ourselves, recording each node's position under its field path. Everything unusual in the text
(syntax errors, duplicate keys, recursive aliases, unsafe tags) becomes a Problem, never a traceback.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from rubrics.rubric.problems import ERROR, Problem, format_path

try:   # libyaml scans and parses about four times faster than PyYAML's pure-Python scanner
    from yaml._yaml import CParser
except ImportError:   # PyYAML built without libyaml
    CParser = None

MAX_DEPTH = 100
PLAIN_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
# Aliases may repeat at most this many nodes, or ALIAS_NODES_PER_WRITTEN_NODE per node written in the file,
# whichever is more: a "billion laughs" file of a few hundred bytes nests aliases of aliases and would
# otherwise expand to 10^9 nodes, while a real rubric that shares a few mappings stays far below.
ALIAS_NODE_BUDGET = 100_000
ALIAS_NODES_PER_WRITTEN_NODE = 10


# Composing and building recurse once per level: past this the file is refused at the offending node, well before
# Python's recursion limit (which would otherwise surface as an error at 1:1).
MAX_NESTING = 200


class _AliasBudget:
    """Counts, while composing, how many nodes each alias would add once expanded, and stops at the
    alias that crosses the budget. Building the data copies an aliased subtree at every alias, so this
    count is exactly the extra work and memory the builder would spend."""

    def _reset_budget(self) -> None:
        self._expanded: dict[int, int] = {}   # id(anchored node) -> its node count, aliases expanded
        self._open: list[int] = []            # node counts of the collections being composed
        self._written = 0
        self._repeated = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            size = self._expanded.get(id(node), 1)   # an alias of an unfinished node is recursive: 1
            self._repeated += size
            budget = max(ALIAS_NODE_BUDGET, ALIAS_NODES_PER_WRITTEN_NODE * self._written)
            if self._repeated > budget:
                raise yaml.composer.ComposerError(
                    None, None, f"alias '*{event.anchor}' expands the document past {budget:,} repeated nodes "
                    "(aliases nested in aliases, a 'billion laughs' file); write the values out or share less",
                    event.start_mark)
        else:
            event = self.peek_event()
            if len(self._open) >= MAX_NESTING:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_NESTING} levels; a rubric needs a handful",
                    event.start_mark)
            anchor = event.anchor   # only an anchored node can be aliased: remember only those
            self._open.append(0)
            try:
                node = super().compose_node(parent, index)
            finally:
                children = self._open.pop()
            size = 1 + children
            if anchor is not None:
                self._expanded[id(node)] = size
            self._written += 1
        if self._open:
            self._open[-1] += size
        return node


class PythonPositionLoader(_AliasBudget, yaml.SafeLoader):
    """SafeLoader: a rubric file can never construct Python objects."""

    def __init__(self, text: str):
        super().__init__(text)
        self._reset_budget()


if CParser is None:
    PositionLoader = PythonPositionLoader
else:
    class PositionLoader(_AliasBudget, Composer, CParser, SafeConstructor, Resolver):
        """The same loader on libyaml's event parser; composition stays in Python for the alias budget."""

        def __init__(self, text: str):
            yaml.reader.Reader(text)   # control characters: the same message and character position
            CParser.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._reset_budget()


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

    def locate_loc(self, loc: Sequence[str | int]) -> tuple[int, int]:
        """`locate(..., at_key=True)` for a path into the data as another loader read it, such as a pydantic
        error's loc: a mapping key matches the key as written here (1 matches `1:`), an int a list index first."""
        path: tuple = ()
        for part in loc:
            if isinstance(part, int) and path + (part,) in self.values:
                path += (part,)
            elif path + (str(part),) in self.values:
                path += (str(part),)
            else:
                break
        return self.locate(path, at_key=True)

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
            return self._scalar(node, path)
        finally:
            self._active.discard(id(node))

    def _scalar(self, node: yaml.ScalarNode, path: tuple):
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:   # e.g. 2024-13-45, which YAML resolves as a timestamp
            self.problems.append(self.source_map.problem(
                path, f"unreadable YAML value {_shortened(node.value)!r}: {_shortened(str(exc))}; quote it to keep "
                      "it as text", "yaml-syntax"))
            return node.value   # the text as written, so that validation adds no second error here

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
        if mark and _is_colon(text, mark):
            message += COLON_HINT
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


COLON_HINT = ("; a colon followed by a space starts a key, so text such as `judge: the reply: short` needs "
              "quotes: `judge: \"the reply: short\"`")


def _is_colon(text: str, mark) -> bool:
    """Whether the parser stopped at a ': ' inside a value, the usual cause being unquoted prose."""
    lines = text.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    return line[mark.column:mark.column + 1] == ":"


def _shortened(text: str, limit: int = 60) -> str:
    """A value as quoted in a message: a 5,000-digit literal is named, not repeated."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
