"""reward.json for task runners that read one (Harbor, Terminal-Bench): one trial, one key.

    rubric grade rubric.yaml /logs/agent/trajectory.json --reward-json /logs/verifier/reward.json

writes `{"reward": 0.62}`. A trial that could not be graded fully (an item not evaluated, the trajectory did not
load) writes `{"reward": null}`: never 0 or false, which a runner would count as a failed task.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from rubrics.trajectory.json_text import dumps
from rubrics.result import Result

KEY = "reward"


class RewardJsonError(ValueError):
    """reward.json holds one trial's reward; it was asked for some other number of trajectories."""


def reward_document(results: Sequence[Result], load_errors: Sequence[str] = ()) -> dict[str, float | None]:
    """{"reward": R} for exactly one graded or failed trajectory; R is None unless its result is complete."""
    count = len(results) + len(load_errors)
    if count != 1:
        raise RewardJsonError(f"reward.json holds one trial's reward: give exactly one trajectory (got {count})")
    return {KEY: results[0].reward if results else None}


def write_reward_json(path: str | os.PathLike, results: Sequence[Result], load_errors: Sequence[str] = ()) -> None:
    """Write reward.json; the file appears whole (written aside, then renamed), since a runner may be polling."""
    text = dumps(reward_document(results, load_errors)) + "\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)   # mkstemp makes it private; the runner reading it may be another user
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def reward_json_option(args: Any, results: Sequence[Result], load_errors: Sequence[str]) -> None:
    """`rubric grade --reward-json PATH`: write it; any other count of trajectories than one is a usage error."""
    try:
        write_reward_json(args.reward_json, results, load_errors)
    except RewardJsonError as exc:
        args.parser.error(f"--reward-json: {exc}")
    except OSError as exc:
        args.parser.error(f"--reward-json: cannot write {args.reward_json}: {exc.strerror or exc}")
