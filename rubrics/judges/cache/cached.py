"""CachedJudge: any judge that can name its judgments' cache keys, with its verdicts kept in a VerdictCache.

The wrapped judge says what each verdict depends on through `cache_keys(requests)` (one key per request, None
for one it cannot key: such a request is judged every time). Hits come back with no model work; the misses go
to the judge in one call, as they would without the cache, and its real verdicts are stored (errors are not).
A hit is trusted only as far as it is consistent: `met` is decided from the stored probability and the item's
threshold, never read from the stored flag, and an entry whose flag disagrees with its probability is a miss.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from rubrics.judges.protocol import ComparisonRequest, Judge, JudgeRequest, Verdict
from rubrics.judges.usage import JudgeUsage
from rubrics.judges.cache.verdict_cache import VerdictCache


@runtime_checkable
class KeyedJudge(Judge, Protocol):
    def cache_keys(self, requests: Sequence[JudgeRequest]) -> list[str | None]:
        """One key per request (rubrics.judges.cache.verdict_cache.verdict_key of everything its verdict depends on),
        or None where the request cannot be keyed."""
        ...


FROM_CACHE = JudgeUsage(cached_verdicts=1)


def trusted_verdict(stored: Verdict, threshold: float) -> Verdict | None:
    """The stored verdict with `met` decided here, from its stored probability and the item's threshold, as the
    judges decide it; None (a miss, judged again) for an entry that cannot have come from a judge: no probability,
    one outside [0, 1], or a stored `met` that disagrees with its probability (a planted or damaged entry)."""
    probability = stored.probability
    if isinstance(probability, bool) or not isinstance(probability, float | int) \
            or not 0.0 <= probability <= 1.0:   # NaN fails this too
        return None
    met = probability >= threshold
    if stored.met is not met:
        return None
    return replace(stored, met=met, probability=float(probability))


class CachedJudge:
    """CachedJudge(judge, cache): the judge's verdicts, read from and written to cache (a VerdictCache)."""

    def __init__(self, judge: KeyedJudge, cache: VerdictCache):
        self.inner = judge
        self.cache = cache
        self.name = judge.name
        if callable(getattr(judge, "compare", None)):   # compares attempts only when the judge it wraps can
            self.compare = self._compare

    def __getattr__(self, name: str) -> Any:   # method, calibration_file, stats(), identity(), ... of the judge
        return getattr(self.inner, name)

    @property
    def progress(self) -> Any:
        return getattr(self.inner, "progress", None)

    @progress.setter
    def progress(self, value: Any) -> None:
        self.inner.progress = value

    def judge(self, requests: Sequence[JudgeRequest]) -> list[Verdict]:
        return self._through_cache(requests, lambda given: self.inner.cache_keys(given), self.inner.judge,
                                   [request.item.threshold for request in requests])

    def _compare(self, requests: Sequence[ComparisonRequest]) -> list[Verdict]:
        """The inner judge's comparisons, kept like its verdicts (a comparison's `met` is its probability >= 0.5)."""
        return self._through_cache(requests, lambda given: self.inner.comparison_keys(given), self.inner.compare,
                                   [0.5] * len(requests))

    def _through_cache(self, requests: Sequence, make_keys: Callable, call: Callable,
                       thresholds: list[float]) -> list[Verdict]:
        if not requests:
            return []
        try:
            keys = list(make_keys(requests))
        except Exception:  # noqa: BLE001 - the judge reports the same failure on each item when it judges
            keys = [None] * len(requests)
        if len(keys) != len(requests):
            keys = [None] * len(requests)
        stored = self.cache.get_many(key for key in keys if key is not None)
        hits = {}
        for key, threshold in zip(keys, thresholds):
            if key is not None and key in stored:
                trusted = trusted_verdict(stored[key], threshold)
                if trusted is not None:
                    hits[key] = trusted
        misses = [i for i, key in enumerate(keys) if key is None or key not in hits]
        fresh = list(call([requests[i] for i in misses])) if misses else []
        if len(fresh) != len(misses):   # a broken judge: let the scorer report it
            return fresh
        self.cache.put_many({keys[i]: verdict for i, verdict in zip(misses, fresh) if keys[i] is not None})
        verdicts: list[Verdict | None] = [None] * len(requests)
        for i, verdict in zip(misses, fresh):
            verdicts[i] = verdict
        for i, key in enumerate(keys):
            if verdicts[i] is None:
                verdicts[i] = replace(hits[key], usage=FROM_CACHE)
        return verdicts  # type: ignore[return-value]
