"""Disjoint sets over string keys, for joining tasks linked by a group label or a near-twin pair."""
from __future__ import annotations


class UnionFind:
    def __init__(self, keys: list[str]):
        self._parent = {k: k for k in keys}

    def find(self, key: str) -> str:
        root = key
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[key] != root:   # path compression
            self._parent[key], key = root, self._parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # The smaller key becomes the root so that the result never depends on call order.
            self._parent[max(ra, rb)] = min(ra, rb)

    def components(self) -> list[list[str]]:
        """Sorted members of each set, sets ordered by their smallest member."""
        members: dict[str, list[str]] = {}
        for key in sorted(self._parent):
            members.setdefault(self.find(key), []).append(key)
        return sorted(members.values(), key=lambda m: m[0])
