"""Map a field path such as ("metadata", "difficulty") to its line and column in a YAML text.

pydantic reports where a field is in the data, not in the file; errors must name file:line:col.
"""
from __future__ import annotations

from collections.abc import Sequence

import yaml


def compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def locate(root: yaml.Node | None, loc: Sequence[str | int]) -> tuple[int, int]:
    """1-based (line, column) of the deepest node on `loc` that exists; (1, 1) without a document."""
    if root is None:
        return 1, 1
    node, mark = root, root.start_mark
    for key in loc:
        child = _child(node, key)
        if child is None:
            break
        node, mark = child
    return mark.line + 1, mark.column + 1


def _child(node: yaml.Node, key: str | int) -> tuple[yaml.Node, yaml.Mark] | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == str(key):
                # Point at the key: an error about a value is easiest to find from its key.
                return v, k.start_mark
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
        item = node.value[key]
        return item, item.start_mark
    return None
