"""The judging progress bar of `rubric grade` (rich, on stderr) and the one-line summary after it.

A judge that supports it exposes a `progress` attribute: a callable (done, total, engine stats) that it calls
while its batch runs. The bar shows judgments per second and the prefix-cache hit rate as they evolve. A first
call with nothing done marks the start of judging: the time before it (loading the judge's model, fetching and
converting it on first use) is reported apart, so judgments per second measure judging alone.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager


@contextmanager
def judge_progress(judge, show_bar: bool | None = None):
    """Attach a progress bar to judge for the duration of the block, then print a summary line to stderr."""
    if judge is None or not hasattr(judge, "progress"):
        yield
        return
    show_bar = sys.stderr.isatty() if show_bar is None else show_bar
    opened = time.perf_counter()
    state = {"done": 0, "stats": {}, "start": None, "earlier": 0, "phase": 0}
    bar, task = _make_bar() if show_bar else (None, None)

    def update(done: int, total: int, stats: dict) -> None:
        if state["start"] is None:
            state["start"] = time.perf_counter() if done == 0 else opened
        if done == 0 and state["phase"]:   # a second batch (a group's comparisons after its verdicts) adds on
            state["earlier"] += state["phase"]
        state["phase"] = done
        done, total = done + state["earlier"], total + state["earlier"]
        state["done"], state["stats"] = done, stats
        if bar is not None:
            elapsed = max(time.perf_counter() - state["start"], 1e-9)
            bar.update(task, completed=done, total=total, rate=f"{done / elapsed:.1f}",
                       hit=f"{stats.get('prefix_cache_hit_rate', 0.0):.0%}")

    judge.progress = update
    try:
        if bar is not None:
            with bar:
                yield
        else:
            yield
    finally:
        judge.progress = None
    if state["done"]:
        seconds = time.perf_counter() - state["start"]
        print(summary_line(state["done"], seconds, state["stats"], setup_s=state["start"] - opened), file=sys.stderr)


def _make_bar():
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]} judgments/s"), TextColumn("prefix cache hit {task.fields[hit]}"),
                   TimeElapsedColumn(), console=Console(stderr=True))
    return bar, bar.add_task("judging", total=None, rate="-", hit="-")


def summary_line(done: int, seconds: float, stats: dict, setup_s: float = 0.0) -> str:
    """``setup_s``: the time before judging started (loading the judge's model, building the prompts), shown
    when it is noticeable."""
    prompt = stats.get("prompt_tokens", 0)
    computed = stats.get("computed_prompt_tokens", 0)
    share = f", computed {computed} of {prompt} prompt tokens" if prompt else ""
    setup = f" after {setup_s:.1f}s starting the judge" if setup_s >= 0.1 else ""
    return (f"judged {done} items in {seconds:.1f}s ({done / max(seconds, 1e-9):.2f} judgments/s){setup}, "
            f"prefix cache hit rate {stats.get('prefix_cache_hit_rate', 0.0):.0%}{share}")
