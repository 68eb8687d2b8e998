"""The judging progress of `rubric grade` on stderr, and the one-line summary after it.

A judge that supports it exposes a `progress` attribute: a callable (done, total, engine stats, work=None) that it
calls while its batch runs. `work`, when the judge knows it, is the fraction (0 to 1) of the batch's prompt work
done: the embedded judge computes every prompt of a batch together, so its verdicts all come near the end, and
work is what moves meanwhile (a judge that calls progress(done, total, stats) alone is followed by its verdicts).
A first call with nothing done marks the start of judging: the time before it (loading the judge's model, fetching
and converting it on first use) is reported apart, so judgments per second measure judging alone.

On a terminal a rich bar shows the verdicts, the share of prompt tokens done, judgments per second, the
prefix-cache hit rate, the time elapsed and the time left. When stderr is piped (a log, CI) a plain line such as
`judging (1m20s): 3/9 verdicts, 41% of prompt tokens, 0.05 judgments/s, about 2m10s left` is printed every
PLAIN_LINE_INTERVAL_S seconds instead, also while no report comes (one engine step of a slow CPU can take
minutes), so a long batch is never silent.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

# piped stderr: one progress line this often while judging (a log to read later, not an animation)
PLAIN_LINE_INTERVAL_S = 10.0


@dataclass
class JudgingProgress:
    """What the judge reported so far. A batch reported after another (a group's comparisons after its verdicts)
    adds on: its first call has nothing done."""
    opened: float                 # when the progress display opened (the judge's model may load after)
    start: float | None = None    # when judging started
    earlier: int = 0              # judgments of the batches before this one
    done: int = 0                 # this batch's judgments done
    total: int = 0                # this batch's judgments
    work: float | None = None     # this batch's fraction of prompt work done, when the judge reports it
    stats: dict = field(default_factory=dict)

    def report(self, done: int, total: int, stats: dict, work: float | None, now: float) -> None:
        if self.start is None:
            self.start = now if done == 0 else self.opened
        if done == 0 and self.done:   # a new batch
            self.earlier += self.done
        self.done, self.total, self.stats = done, total, stats
        self.work = None if work is None else min(max(float(work), 0.0), 1.0)

    @property
    def judged(self) -> int:
        return self.earlier + self.done

    @property
    def planned(self) -> int:
        return self.earlier + self.total

    @property
    def progressed(self) -> float:
        """Judgments done, in judgments, counting the prompt work of those still running (the bar's position)."""
        return self.earlier + max(self.done, (self.work or 0.0) * self.total)

    def rate(self, now: float) -> float:
        """Judgments per second so far, the work of unfinished ones counted (0 done for 80 s is not 0/s)."""
        return self.progressed / max(now - (self.start if self.start is not None else now), 1e-9)

    def seconds_left(self, now: float) -> float | None:
        """Time left for the batches known so far at the rate so far; None before anything moved or once they are
        done."""
        rate, progressed = self.rate(now), self.progressed
        return None if progressed <= 0 or progressed >= self.planned else (self.planned - progressed) / rate


def progress_line(progress: JudgingProgress, now: float) -> str:
    """`judging (1m20s): 3/9 verdicts, 41% of prompt tokens, 0.05 judgments/s, about 2m10s left` (the share of prompt
    tokens only from a judge that reports it, the time left once anything moved)."""
    parts = [f"{progress.judged}/{progress.planned} verdicts"]
    if progress.work is not None:
        parts.append(f"{progress.work:.0%} of prompt tokens")
    parts.append(f"{progress.rate(now):.2f} judgments/s")
    left = time_left_text(progress.seconds_left(now))
    if left:
        parts.append(left)
    return f"judging ({duration_text(now - progress.start)}): " + ", ".join(parts)


def time_left_text(seconds: float | None) -> str:
    return "" if seconds is None else f"about {duration_text(seconds)} left"


def duration_text(seconds: float) -> str:
    """45s, 2m10s, 1h05m."""
    seconds = max(round(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@contextmanager
def judge_progress(judge, show_bar: bool | None = None, clock: Callable[[], float] = time.perf_counter):
    """Show the judge's progress on stderr for the duration of the block (a bar on a terminal, a plain line every
    PLAIN_LINE_INTERVAL_S seconds otherwise), then print a summary line. show_bar: None for "when stderr is a
    terminal"; clock: seconds (tests pass their own)."""
    if judge is None or not hasattr(judge, "progress"):
        yield
        return
    show_bar = sys.stderr.isatty() if show_bar is None else show_bar
    progress = JudgingProgress(opened=clock())
    lock = threading.Lock()   # the judge's thread reports, the plain lines' timer reads
    display = _Bar(progress) if show_bar else _PlainLines(progress, clock, lock)

    def update(done: int, total: int, stats: dict, work: float | None = None) -> None:
        with lock:
            now = clock()
            progress.report(done, total, stats, work, now)
            display.show(now)

    judge.progress = update
    try:
        with display:
            yield
    finally:
        judge.progress = None
    if progress.judged:
        seconds = clock() - progress.start
        print(summary_line(progress.judged, seconds, progress.stats, setup_s=progress.start - progress.opened),
              file=sys.stderr)


class _Bar:
    """The rich bar (a terminal), fed on every report; rich's own refresh keeps the elapsed time moving in between.
    `judging ━━━━━━━━ 3/9 41% tokens 0.05 judgments/s cache 87% 0:01:20 2m10s left`: about 70 columns of text, the
    bar takes what a terminal has left."""

    def __init__(self, progress: JudgingProgress) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = progress
        self.bar = Progress(TextColumn("judging"), BarColumn(bar_width=None), TextColumn("{task.fields[verdicts]}"),
                            TextColumn("{task.fields[work]}"), TextColumn("{task.fields[rate]} judgments/s"),
                            TextColumn("cache {task.fields[hit]}"), TimeElapsedColumn(),
                            TextColumn("{task.fields[left]}"), console=Console(stderr=True), expand=True)
        self.task = self.bar.add_task("judging", total=None, verdicts="-", work="", rate="-", hit="-", left="")

    def show(self, now: float) -> None:
        progress = self.progress
        left = progress.seconds_left(now)
        self.bar.update(self.task, completed=progress.progressed, total=progress.planned,
                        verdicts=f"{progress.judged}/{progress.planned}",
                        work=f"{progress.work:.0%} tokens" if progress.work is not None else "",
                        rate=f"{progress.rate(now):.2f}", hit=f"{progress.stats.get('prefix_cache_hit_rate', 0.0):.0%}",
                        left="" if left is None else f"{duration_text(left)} left")

    def __enter__(self) -> _Bar:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)


class _PlainLines:
    """Piped stderr: a progress line once PLAIN_LINE_INTERVAL_S has passed since judging started or since the last
    line, checked at each report and by a timer between them (a batch shorter than that prints its summary line
    alone)."""

    def __init__(self, progress: JudgingProgress, clock: Callable[[], float], lock: threading.Lock) -> None:
        self.progress, self.clock, self.lock = progress, clock, lock
        self.last: float | None = None
        self.closed = threading.Event()
        self.timer = threading.Thread(target=self._tick, name="judging-progress-lines", daemon=True)

    def show(self, now: float) -> None:
        """Called with the lock held."""
        start = self.progress.start
        if start is None or now - (self.last if self.last is not None else start) < PLAIN_LINE_INTERVAL_S:
            return
        self.last = now
        print(progress_line(self.progress, now), file=sys.stderr, flush=True)

    def _tick(self) -> None:
        while not self.closed.wait(PLAIN_LINE_INTERVAL_S / 4):   # a line at most a quarter interval late
            with self.lock:
                self.show(self.clock())

    def __enter__(self) -> _PlainLines:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closed.set()
        self.timer.join()


def summary_line(done: int, seconds: float, stats: dict, setup_s: float = 0.0) -> str:
    """``setup_s``: the time before judging started (loading the judge's model, building the prompts), shown
    when it is noticeable."""
    prompt = stats.get("prompt_tokens", 0)
    computed = stats.get("computed_prompt_tokens", 0)
    share = f", computed {computed} of {prompt} prompt tokens" if prompt else ""
    setup = f" after {setup_s:.1f}s starting the judge" if setup_s >= 0.1 else ""
    return (f"judged {done} items in {seconds:.1f}s ({done / max(seconds, 1e-9):.2f} judgments/s){setup}, "
            f"prefix cache hit rate {stats.get('prefix_cache_hit_rate', 0.0):.0%}{share}")
