"""The peak of Python's traced allocations while a call runs (tracemalloc: not RSS, so neither the machine nor the
allocator changes the figure), for the tests that bound what reading hostile input costs."""
from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced_peak(call: Callable[[], T]) -> tuple[T, int]:
    """call()'s result and the peak bytes traced while it ran."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
