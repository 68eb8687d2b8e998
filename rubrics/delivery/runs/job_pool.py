"""Run grading jobs --jobs at a time, each on a slot of its own (the slot picks the sandbox uid), results in input order."""
from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Out = TypeVar("Out")


def run_jobs(items: Sequence[Item], work: Callable[[Item, int], Out], jobs: int,
             on_done: Callable[[Out], None] | None = None) -> list[Out]:
    """work(item, slot) must not raise: each job turns its own failure into a result."""
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    slots: queue.Queue[int] = queue.Queue()
    for slot in range(jobs):
        slots.put(slot)

    def one(item: Item) -> Out:
        slot = slots.get()
        try:
            out = work(item, slot)
        finally:
            slots.put(slot)
        if on_done is not None:
            on_done(out)
        return out

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, items))
