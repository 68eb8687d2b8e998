"""What the scorer grades: jobs, each one loaded trajectory (or why it did not load) and one compiled plan (or why
the rubric did not compile).

Callers give trajectories with one rubric, a rubric per trajectory, or (trajectory, rubric) pairs; all three
become the same list of Jobs here, so the scorer has one code path. Each distinct rubric is loaded and compiled
once (PlanCache), however many trajectories use it.
"""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from rubrics.input_files import fits_a_path, looks_like_path
from rubrics.rubric.compiler import Plan, compile_rubric
from rubrics.rubric.spec import Band
from rubrics.trajectory.paths import expand_input


@dataclass(frozen=True)
class Pair:
    """One trajectory and the rubric it is graded against, each as the caller gave it (path, text, dict or
    object). score_many also accepts plain 2-tuples, which become Pairs at the door."""
    trajectory: Any
    rubric: Any


@dataclass(frozen=True)
class LoadFailure:
    trajectory_id: str
    message: str


@dataclass(frozen=True)
class RubricFailure:
    """A rubric that cannot be used: the trajectories paired with it get a Result that says why."""
    rubric_id: str
    message: str


@dataclass(frozen=True)
class Job:
    plan: Plan | RubricFailure
    trajectory: Any   # a Trajectory, or a LoadFailure


def load_source(src: Any, index: int):
    """A Trajectory, or a LoadFailure naming the input: loading one input never raises."""
    from rubrics.trajectory import Trajectory, load_trajectory

    if isinstance(src, Trajectory):
        return src
    if isinstance(src, Exception):   # e.g. a TrajectoryLoadError yielded by expand_input
        return LoadFailure(getattr(src, "source", None) or f"#{index}", str(src))
    try:
        return load_trajectory(src)
    except (ValueError, OSError, TypeError) as exc:
        name = str(src) if isinstance(src, (str, bytes)) or hasattr(src, "__fspath__") else None
        if name is None and isinstance(src, dict) and isinstance(src.get("id"), str):
            name = src["id"]
        return LoadFailure(name or f"#{index}", f"cannot load the trajectory: {exc}")


def _rubric_name(rubric: Any) -> str:
    if isinstance(rubric, dict) and isinstance(rubric.get("id"), str):
        return rubric["id"]
    if isinstance(rubric, Path) or (isinstance(rubric, str) and fits_a_path(rubric)):
        return str(rubric)
    return getattr(rubric, "id", None) if isinstance(getattr(rubric, "id", None), str) else "<rubric>"


class PlanCache:
    """Compiled plans by rubric: a Rubric object by identity, a dict by its content, YAML text by its text, a file
    by its path, size and modification time (an edited file is compiled again). Bounded; safe across threads."""

    def __init__(self, limit: int = 256):
        self.limit = limit
        self._plans: OrderedDict[tuple, tuple[Any, Plan]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(rubric: Any, uncertain: Band | None) -> tuple | None:
        from rubrics.rubric.spec import Rubric

        band = tuple(uncertain) if uncertain is not None else None
        if isinstance(rubric, Rubric):
            return ("object", id(rubric), band)
        if isinstance(rubric, dict):
            try:
                return ("dict", json.dumps(rubric, sort_keys=True, default=str), band)
            except (TypeError, ValueError, RecursionError):
                return None   # compiled every time; load_rubric reports what is wrong with it
        if isinstance(rubric, Path) or (isinstance(rubric, str) and looks_like_path(rubric)):
            try:
                stat = Path(rubric).stat()
            except (OSError, ValueError):
                return None
            return ("file", str(Path(rubric).resolve()), stat.st_size, stat.st_mtime_ns, band)
        if isinstance(rubric, str):
            return ("text", rubric, band)
        return None

    def plan(self, rubric: Any, uncertain: Band | None = None) -> Plan:
        """The compiled plan; raises RubricError (or TypeError for something that is no rubric)."""
        from rubrics.rubric.load import load_rubric

        key = self._key(rubric, uncertain)
        if key is not None:
            with self._lock:
                hit = self._plans.get(key)
                if hit is not None and (key[0] != "object" or hit[0] is rubric):
                    self._plans.move_to_end(key)
                    return hit[1]
        plan = compile_rubric(load_rubric(rubric), uncertain)
        if key is not None:
            with self._lock:
                # the object itself is kept with an identity key, so its id cannot be reused while cached
                self._plans[key] = (rubric if key[0] == "object" else None, plan)
                while len(self._plans) > self.limit:
                    self._plans.popitem(last=False)
        return plan

    def plan_or_failure(self, rubric: Any, uncertain: Band | None = None) -> Plan | RubricFailure:
        from rubrics.rubric.problems import RubricError

        try:
            return self.plan(rubric, uncertain)
        except RubricError as exc:
            return RubricFailure(_rubric_name(rubric), f"cannot load the rubric: {exc}")
        except (TypeError, ValueError, OSError) as exc:
            return RubricFailure(_rubric_name(rubric), f"cannot load the rubric: {type(exc).__name__}: {exc}")


def _as_pair(entry: Any, index: int) -> Pair:
    if isinstance(entry, Pair):
        return entry
    if isinstance(entry, tuple) and len(entry) == 2:
        return Pair(*entry)
    raise TypeError(f"score_many without a rubric takes (trajectory, rubric) pairs; input #{index} is a "
                    f"{type(entry).__name__}")


def _is_rubric_list(rubric: Any) -> bool:
    """A rubric per trajectory is a list or tuple; one rubric is a path, text, dict or Rubric."""
    return isinstance(rubric, (list, tuple))


def make_jobs(trajectories: Iterable, rubric: Any = None, uncertain: Band | None = None,
              plans: PlanCache | None = None) -> list[Job]:
    """Jobs in input order. `rubric` is one rubric for every trajectory, a list with one rubric per input, or
    None when `trajectories` holds (trajectory, rubric) pairs. A trajectory file contributes one job per entry,
    each with its input's rubric. With a single rubric an unusable rubric raises RubricError (nothing could be
    graded); with a rubric per trajectory it fails only its own trajectories."""
    plans = plans or PlanCache(limit=1 << 30)   # per call: every distinct rubric of the call stays compiled
    if rubric is None:
        pairs = [_as_pair(entry, i) for i, entry in enumerate(trajectories)]
    elif _is_rubric_list(rubric):
        sources = list(trajectories)
        if len(sources) != len(rubric):
            raise ValueError(f"{len(sources)} trajectories but {len(rubric)} rubrics: give one rubric per "
                             "trajectory, or one rubric for all")
        pairs = [Pair(src, r) for src, r in zip(sources, rubric)]
    else:
        shared = plans.plan(rubric, uncertain)   # raises RubricError: no trajectory could be graded
        sources = (entry for src in trajectories for entry in expand_input(src))
        return [Job(shared, load_source(src, i)) for i, src in enumerate(sources)]
    jobs: list[Job] = []
    for pair in pairs:
        plan = plans.plan_or_failure(pair.rubric, uncertain)
        for src in expand_input(pair.trajectory):
            jobs.append(Job(plan, load_source(src, len(jobs))))
    return jobs
