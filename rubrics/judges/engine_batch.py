"""Score many (prompt, choices) jobs in one engine batch through the step-level API of judge_engine.

LLM.score takes one list of choices for all prompts; the judge needs its own choices per prompt (each rubric
item's statement for the likelihood method) and a progress report while the batch runs, so it drives the
engine's public step API itself, the way LLM.score does: each choice becomes a request of prompt ids + choice
ids with log-probabilities from the first choice token, and the prefix cache serves the shared prompt blocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from judge_engine import SamplingParams

Job = tuple[list[int], list[list[int]]]  # (prompt ids, [choice ids, ...])
# progress(judgments done, judgments in the batch, engine stats)
Progress = Callable[[int, int, dict], None]

_batch_ids = itertools.count()


def score_batch(engine: Any, jobs: list[Job], progress: Progress | None = None,
                weights: list[int] | None = None) -> list[list[float] | str]:
    """Per job, the summed log-probability of each choice given the prompt, or the engine's reason (a string)
    when it could not be scored. weights: how many judgments each job stands for (for progress only)."""
    params = SamplingParams(max_tokens=0)
    batch = next(_batch_ids)
    requests: list[list[str]] = []
    owner: dict[str, int] = {}
    for index, (prompt, choices) in enumerate(jobs):
        row = []
        for number, choice in enumerate(choices):
            request_id = f"judge-{batch}-{index}-{number}"
            engine.add_request(request_id, list(prompt) + list(choice), params, stream=False,
                               logprobs_from=len(prompt))
            owner[request_id] = index
            row.append(request_id)
        requests.append(row)
    remaining = [len(row) for row in requests]
    weights = weights or [1] * len(jobs)
    total, done = sum(weights), 0
    finished: dict[str, Any] = {}
    while len(finished) < len(owner):
        for output in engine.step():
            if output.finished and output.request_id in owner:
                finished[output.request_id] = output
                index = owner[output.request_id]
                remaining[index] -= 1
                if remaining[index] == 0:
                    done += weights[index]
                    if progress is not None:
                        progress(done, total, engine.stats())
    return [_row([finished[r] for r in row], len(prompt)) for row, (prompt, _) in zip(requests, jobs)]


def _row(outputs: list[Any], prompt_len: int) -> list[float] | str:
    values = []
    for output in outputs:
        if output.error is not None:
            return output.error
        entries = output.prompt_logprobs[prompt_len:]
        values.append(sum(entry[token] for entry, token in zip(entries, output.prompt_token_ids[prompt_len:])))
    return values
