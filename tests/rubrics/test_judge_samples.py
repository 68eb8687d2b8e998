"""Reasoned mode with `samples: k` (self-consistency): k rationales drawn as one engine request sharing the prompt,
each scored, their probabilities averaged; on the real engine over the tiny judge model."""
from __future__ import annotations

import pytest
import torch

import rubrics
from judge_models import tiny_judge_model
from rubrics.rubric.compiler import compile_rubric
from rubrics.judges.backends.embedded import EmbeddedJudge
from test_judge_prompts import request

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    return EmbeddedJudge(model=str(tiny_judge_model(str(tmp_path_factory.mktemp("judge-model")))), method="choice")


def test_the_verdict_is_the_mean_of_one_verdict_per_sampled_rationale(judge):
    k = 3
    combined, = judge.judge([request(mode="reasoned", max_tokens=6, samples=k)])
    planned = judge.build_prompts([request(mode="reasoned", max_tokens=6, samples=k)])
    judge._generate_rationales(planned)
    rationales = planned[0].rationales
    assert len(rationales) == k and len(set(rationales)) > 1   # sampled, and seeded: the same ones every time
    # each rationale on its own: the same prompt, answered after that rationale
    singles = []
    for rationale in rationales:
        one = judge.build_prompts([request(mode="reasoned", max_tokens=6)])
        one[0].rationales = [rationale]
        singles.append(judge._verdicts(one)[0].probability)
    assert combined.probability == pytest.approx(sum(singles) / k, abs=1e-12)
    assert combined.met == (combined.probability >= 0.5)
    assert combined.rationale == rationales[0]


def test_one_sample_is_the_greedy_rationale(judge):
    plain, = judge.judge([request(mode="reasoned", max_tokens=6)])
    one, = judge.judge([request(mode="reasoned", max_tokens=6, samples=1)])
    assert (one.probability, one.rationale) == (plain.probability, plain.rationale)


def test_the_rubric_sets_samples_per_item_or_as_a_default():
    rubric = rubrics.load_rubric({
        "version": 1, "id": "r", "task": "t", "judge": {"mode": "reasoned", "samples": 4},
        "criteria": [{"id": "a", "points": 1, "judge": "does a"},
                     {"id": "b", "points": 1, "judge": {"text": "does b", "samples": 2}}]})
    assert [step.judge.samples for step in compile_rubric(rubric).judge_steps] == [4, 2]
    with pytest.raises(rubrics.RubricError):
        rubrics.load_rubric({"version": 1, "id": "r", "task": "t",
                                  "criteria": [{"id": "a", "points": 1, "judge": {"text": "x", "samples": 17}}]})
