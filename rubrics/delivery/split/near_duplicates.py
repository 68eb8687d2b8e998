"""Near-duplicate instructions: Jaccard similarity of character shingles, found exactly with prefix filtering.

Two tasks are near twins when the Jaccard similarity of their sets of character 5-grams (after
lower-casing and collapsing whitespace) is at least the threshold (default 0.7). A lab that samples
its own held-out set at random would leak such twins into training, so the split keeps them together.

All pairs above the threshold are found exactly, without comparing every pair: with shingles sorted
rarest first, two sets A and B with J(A, B) >= t must share a shingle among the first
|A| - ceil(t * |A|) + 1 of A and the first |B| - ceil(t * |B|) + 1 of B (the "prefix filter" of
all-pairs similarity search). Candidates from that index are then verified exactly. No MinHash is
used because its misses would let a twin straddle the split.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

SHINGLE_SIZE = 5
DEFAULT_THRESHOLD = 0.7


@dataclass(frozen=True)
class NearDuplicate:
    a: str          # task ids, a < b
    b: str
    jaccard: float


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip()


def shingles(text: str, size: int = SHINGLE_SIZE) -> frozenset[str]:
    text = normalize(text)
    if len(text) <= size:
        return frozenset([text]) if text else frozenset()
    return frozenset(text[i:i + size] for i in range(len(text) - size + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0   # two empty instructions are the same instruction
    return len(a & b) / len(a | b)


def near_duplicates(texts: dict[str, str], threshold: float = DEFAULT_THRESHOLD) -> list[NearDuplicate]:
    """Every pair of ids whose texts have shingle Jaccard >= threshold, sorted by (a, b)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    sets = {task_id: shingles(text) for task_id, text in texts.items()}
    frequency = Counter(s for shingle_set in sets.values() for s in shingle_set)
    # Shingles become their rank, rarest first: prefixes are then slices, and set work is on ints.
    rank = {s: i for i, s in enumerate(sorted(frequency, key=lambda s: (frequency[s], s)))}
    ranked = {task_id: sorted(rank[s] for s in shingle_set) for task_id, shingle_set in sets.items()}
    as_sets = {task_id: frozenset(ranks) for task_id, ranks in ranked.items()}
    index: dict[int, list[str]] = defaultdict(list)
    pairs: dict[tuple[str, str], float] = {}
    for task_id in sorted(sets):
        ordered, size = ranked[task_id], len(ranked[task_id])
        prefix = ordered[: _prefix_length(size, threshold)]
        candidates: set[str] = set()
        for s in prefix:
            candidates.update(index[s])
        for other in candidates:
            other_size = len(as_sets[other])
            # |A n B| <= min size, so J >= t needs the smaller set to be at least t times the larger.
            if min(size, other_size) < threshold * max(size, other_size) - 1e-9:
                continue
            common = len(as_sets[task_id] & as_sets[other])
            score = common / (size + other_size - common)
            if score >= threshold:
                pairs[(other, task_id)] = score
        for s in prefix:
            index[s].append(task_id)
    empties = sorted(t for t, s in sets.items() if not s)
    for i, a in enumerate(empties):
        for b in empties[i + 1:]:
            pairs[(a, b)] = 1.0   # two empty instructions are the same instruction
    return [NearDuplicate(a, b, round(score, 6)) for (a, b), score in sorted(pairs.items())]


def _prefix_length(size: int, threshold: float) -> int:
    # Small epsilon: ceil(0.7 * 10) must be 7, not 8 from 7.000000000000001.
    return size - math.ceil(threshold * size - 1e-9) + 1
