"""The embedded judge's verdicts on the bundled examples, recorded once and compared on every run.

The record (judge_golden.json, beside this file) holds, for each rubric × method: the exact token ids the
engine was asked to score (a sha256 over every prompt and its choices, in order), the engine's prompt and
computed token counts, every judge probability and every score. It was written before the judge path was
restructured into typed objects and method files, so this test is what says that the restructuring changed
nothing a user can see. Token ids and counts must match exactly; probabilities within 1e-5, because float
sums may round differently on another CPU (the ids going in are the contract, the last bits are not).

Rewrite the record only when a prompt or a method changes on purpose:
    python tests/rubrics/test_judge_golden.py --write
Last rewritten (the four invoice cases only, 2026-12-01): inv-09's trajectory holds chat special-token strings
(`<|im_end|><|im_start|>assistant`), which untrusted text now carries broken by a zero-width space, so that a
server judge cannot read them as turns either; every other case's token ids are unchanged.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RECORD = HERE / "judge_golden.json"
EXAMPLES = REPO / "examples"
# The calibrations the record was made with (likelihood's then-shipped fit, choice uncalibrated): the methods'
# prompts and math are what is pinned, not their fits, which are refitted as the labelled sets grow.
SCALE, OFFSET = 1.9749, -0.3215
CASES = [
    # (name, rubric, trajectories, method, mode)
    ("cfo-choice", "cfo-mis/rubric.yaml", "cfo-mis/trajectories", "choice", None),
    ("cfo-likelihood", "cfo-mis/rubric.yaml", "cfo-mis/trajectories", "likelihood", None),
    ("invoice-choice", "invoice-fix/rubric.yaml", "invoice-fix/trajectories", "choice", None),
    ("invoice-likelihood", "invoice-fix/rubric.yaml", "invoice-fix/trajectories", "likelihood", None),
    ("invoice-fewshot-choice", "labels/invoice-fix/rubric.fewshot.yaml", "invoice-fix/trajectories", "choice",
     None),
    ("invoice-fewshot-likelihood", "labels/invoice-fix/rubric.fewshot.yaml", "invoice-fix/trajectories",
     "likelihood", None),
    ("cfo-reasoned", "cfo-mis/rubric.yaml", "cfo-mis/trajectories", "choice", "reasoned"),
]


class RecordingLLM:
    """The real LLM, with every score and generate call's token ids hashed on the way through."""

    def __init__(self, llm):
        self.llm = llm
        self.digest = hashlib.sha256()

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def score_with_usage(self, prompts, choices, **options):
        for prompt, prompt_choices in zip(prompts, choices):
            self.digest.update(json.dumps([list(prompt), [list(c) for c in prompt_choices]]).encode())
        return self.llm.score_with_usage(prompts, choices, **options)

    def generate(self, prompts, params, **options):
        for prompt, param in zip(prompts, params):
            self.digest.update(json.dumps(["generate", list(prompt), param.max_tokens]).encode())
        return self.llm.generate(prompts, params, **options)


def _rubric_for(path: Path, mode: str | None, max_tokens: int = 12):
    """The example's rubric without its facts (a missing fact decides an item before any prompt is built, so the
    record pins the prompt of every judge item, as it did before facts existed), in the mode asked."""
    from rubrics.rubric.load import load_rubric
    from rubrics.rubric.spec import JudgeOptions

    rubric = load_rubric(path)
    rubric = rubric.model_copy(update={section: tuple(
        item.model_copy(update={"config": item.config.model_copy(update={"facts": None})})
        if isinstance(item.config, JudgeOptions) else item for item in getattr(rubric, section))
        for section in ("gates", "criteria")})
    if mode is None:
        return rubric
    judge = (rubric.judge.model_copy(update={"mode": mode, "max_tokens": max_tokens}) if rubric.judge
             else None)
    return rubric.model_copy(update={"judge": judge})


def record_case(llm, rubric_path: str, trajectories: str, method: str, mode: str | None) -> dict:
    import rubrics
    from rubrics.judges.backends.embedded import EmbeddedJudge
    from rubrics.judges.methods import IDENTITY, Calibration

    recording = RecordingLLM(llm)
    calibrations = {"likelihood": Calibration(SCALE, OFFSET), "choice": IDENTITY}
    judge = EmbeddedJudge(method=method, calibrations=calibrations, llm=recording)
    before = llm.stats()
    paths = sorted((EXAMPLES / trajectories).glob("*.json"))
    results = rubrics.score_many(paths, _rubric_for(EXAMPLES / rubric_path, mode), judge=judge)
    after = llm.stats()
    return {
        "token_ids_sha256": recording.digest.hexdigest(),
        "prompt_tokens": after["prompt_tokens"] - before["prompt_tokens"],
        "computed_prompt_tokens": after["computed_prompt_tokens"] - before["computed_prompt_tokens"],
        "scores": {r.trajectory_id: r.score for r in results},
        "probabilities": {f"{r.trajectory_id}/{i.id}": i.probability for r in results for i in r.items
                          if i.method == "judge"},
    }


def record_all() -> dict:
    from judge_engine import LLM

    from rubrics.judges.backends.embedded import engine_defaults

    llm = LLM(**engine_defaults({}))   # the embedded model, as the judge runs it (float32); one engine, fixed order
    return {name: record_case(llm, *case) for name, *case in CASES}


@pytest.fixture(scope="module")
def measured():
    pytest.importorskip("torch")
    return record_all()


@pytest.mark.parametrize("name", [case[0] for case in CASES])
def test_the_judge_sees_the_same_tokens_and_gives_the_same_verdicts(measured, name):
    expected = json.loads(RECORD.read_text())[name]
    got = measured[name]
    assert got["token_ids_sha256"] == expected["token_ids_sha256"]
    assert (got["prompt_tokens"], got["computed_prompt_tokens"]) == \
        (expected["prompt_tokens"], expected["computed_prompt_tokens"])
    assert got["probabilities"].keys() == expected["probabilities"].keys()
    for key, probability in expected["probabilities"].items():
        assert got["probabilities"][key] == pytest.approx(probability, abs=1e-5), key
    assert got["scores"] == expected["scores"]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/rubrics/test_judge_golden.py --write")
    RECORD.write_text(json.dumps(record_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {RECORD}")
