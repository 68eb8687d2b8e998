"""rubrics.integrations.trl: a real GRPOTrainer trains two steps on a tiny random Llama with our reward function,
and the rewards it logs are the scores rubrics.score gives the same prompts and completions."""
from __future__ import annotations

import math

import numpy as np
import pytest

from judge_models import tiny_judge_model

pytest.importorskip("trl", reason="needs the [trl] extra")

import rubrics  # noqa: E402
from rubrics.integrations.trl import as_messages, rubric_reward  # noqa: E402
from rubrics.result import IncompleteResultError  # noqa: E402

# Two rubrics, each on its own prompt. The model is random, so the checks look at shapes its noise shows in some
# completions and not others (capitalised words, "ing", digits); GREETING also has a judge item.
GREETING = r"""
version: 1
id: greeting
task: Say hello.
gates:
  - {id: says-something, regex: {pattern: "\\S"}}
criteria:
  - {id: has-ing, points: 1, regex: {pattern: "ing"}}
  - {id: two-capitals, points: 2, regex: {pattern: "[A-Z][a-z]+ [A-Z]"}}
  - {id: friendly, points: 1, judge: the reply greets the user}
"""
COUNTING = r"""
version: 1
id: counting
task: Count to three.
criteria:
  - {id: has-ion, points: 2, regex: {pattern: "ion"}}
  - {id: has-digit, points: 1, regex: {pattern: "\\d"}}
  - {id: no-shouting, points: -1, regex: {pattern: "[A-Z]{3}"}}
"""
PROMPTS = {"Say hello.": GREETING, "Count to three.": COUNTING}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_judge_model(str(tmp_path_factory.mktemp("policy")))


@pytest.fixture(scope="module")
def judge(model_dir):
    return rubrics.EmbeddedJudge(model=str(model_dir), method="choice")


@pytest.mark.slow
def test_grpo_trainer_logs_the_rubric_scores_as_rewards(model_dir, judge, tmp_path):
    import pandas as pd
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": text}], "rubric": rubric}
                                 for text, rubric in PROMPTS.items()])
    reward = rubric_reward(judge=judge)   # no rubric: each sample's `rubric` column
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=12, max_steps=2, logging_steps=1, log_completions=True, report_to=[],
                      use_cpu=True, seed=0, save_strategy="no", dataloader_num_workers=0)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=reward, args=args, train_dataset=dataset)
    trainer.train()

    tables = sorted((tmp_path / "completions").glob("completions_*.parquet"))
    assert len(tables) == 2   # one per step
    logged = [row for table in tables for row in pd.read_parquet(table).to_dict("records")]
    assert len(logged) == 8   # 2 steps x 2 prompts x 2 generations
    expected = []
    for row in logged:
        prompt, completion = list(row["prompt"]), list(row["completion"])
        rubric = PROMPTS[prompt[0]["content"]]
        result = rubrics.score(as_messages(prompt, completion), rubric, judge=judge)
        assert result.complete
        if rubric is GREETING:   # its judge item went through the embedded judge
            assert [item.probability is not None for item in result.items if item.method == "judge"] == [True]
        expected.append(result.score)
        # TRL keeps rewards as float32: the logged value is the score rounded to float32, nothing else.
        assert row["rubric"] == np.float32(result.score), (row, result.to_dict())
    assert len(set(expected)) >= 3, f"the completions should not all score alike: {expected}"
    means = [entry["rewards/rubric/mean"] for entry in trainer.state.log_history if "rewards/rubric/mean" in entry]
    per_step = [expected[:4], expected[4:]]
    assert means == pytest.approx([sum(step) / 4 for step in per_step], abs=1e-6)
    assert [entry["rubric/incomplete"] for entry in trainer.state.log_history if "rubric/incomplete" in entry] \
        == [0.0, 0.0]


def test_the_reward_function_takes_what_grpo_passes_and_grades_each_row_with_its_rubric(judge):
    reward = rubric_reward(judge=judge)
    prompts = [[{"role": "user", "content": "Count to three."}]] * 2 + ["Say hello."]
    completions = [[{"role": "assistant", "content": "one two three: 1 2 3 action"}],
                   [{"role": "assistant", "content": "ABC"}],
                   "Hello, nice Morning Greetings"]
    kwargs = {"completion_ids": [[1], [2], [3]], "trainer_state": object(), "log_extra": lambda *a: None,
              "rubric": [COUNTING, COUNTING, GREETING], "other": [1, 2, 3]}
    values = reward(prompts=prompts, completions=completions, **kwargs)
    scores = [rubrics.score(as_messages(p, c), r, judge=judge).score
              for p, c, r in zip(prompts, completions, kwargs["rubric"])]
    assert values == scores
    assert values[0] == 1.0 and values[1] == 0.0   # counting: ion + digit = 3/3; only "ABC": max(0, -1)/3
    assert reward.__name__ == "rubric" and [r.rubric_id for r in reward.last_results] == ["counting", "counting",
                                                                                         "greeting"]


def test_an_incomplete_result_raises_by_default_and_never_becomes_a_silent_zero():
    prompts, completions = ["Say hello."] * 2, ["Hello there, Good Morning", "Hi"]
    with pytest.raises(IncompleteResultError, match="completion-0"):
        rubric_reward(GREETING, judge=rubrics.NoJudge())(prompts, completions)
    masked = rubric_reward(GREETING, judge=rubrics.NoJudge(), on_error="nan")(prompts, completions)
    assert all(math.isnan(value) for value in masked)
    assert rubric_reward(GREETING, judge=rubrics.NoJudge(), on_error="zero")(prompts, completions) == [0.0, 0.0]


def test_bad_arguments_fail_when_the_reward_is_built_or_called():
    with pytest.raises(ValueError, match="on_error"):
        rubric_reward(COUNTING, on_error="skip")
    with pytest.raises(rubrics.RubricError):
        rubric_reward("version: 1\nid: broken\ncriteria: 3\n")
    with pytest.raises(KeyError, match="'rubric' column"):
        rubric_reward()(["Count"], ["1"], task=["x"])


def test_to_trajectory_sees_the_rollouts_environment():
    class Workspace:   # what a TRL environment_factory instance may hold after a rollout
        def __init__(self, files: dict[str, str]):
            self.files = files

    def with_files(prompt, completion, row):
        return {"messages": as_messages(prompt, completion), "state": {"files": row["environment"].files}}

    wrote_report = "version: 1\nid: report\ntask: Write the report.\ncriteria:\n" \
                   "  - {id: report, points: 1, file: {path: report.md, contains: total}}\n"
    reward = rubric_reward(wrote_report, to_trajectory=with_files)
    values = reward(["Write the report."] * 2, ["Done."] * 2,
                    environments=[Workspace({"report.md": "The total is 4."}), Workspace({})])
    assert values == [1.0, 0.0]


@pytest.mark.slow
def test_grpo_trainer_with_group_grading_rewards_the_completions_of_each_prompt_ranked_together(model_dir, judge,
                                                                                                  tmp_path):
    import pandas as pd
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Say hello."}], "rubric": GREETING}] * 2)
    reward = rubric_reward(judge=judge, group=True, comparisons=2)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=12, max_steps=1, logging_steps=1, log_completions=True, report_to=[],
                      use_cpu=True, seed=0, save_strategy="no", dataloader_num_workers=0)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=reward, args=args, train_dataset=dataset)
    trainer.train()

    logged = [row for table in sorted((tmp_path / "completions").glob("completions_*.parquet"))
              for row in pd.read_parquet(table).to_dict("records")]
    assert len(logged) == 4   # one prompt, four generations: one group
    group = [as_messages(list(row["prompt"]), list(row["completion"])) for row in logged]
    expected = rubrics.score_group(group, GREETING, judge=judge, comparisons=2)
    assert [row["rubric"] for row in logged] == [np.float32(r.score) for r in expected]
    places = [item.group for r in reward.last_results for item in r.items if item.method == "judge"]
    assert len(places) == 4 and all(p.attempts == 4 and p.compared_with == 2 for p in places)


def test_group_grading_groups_the_completions_by_prompt_and_rubric(judge):
    reward = rubric_reward(judge=judge, group=True, comparisons=1)
    prompts = ["Say hello."] * 3 + ["Count to three."] * 2 + ["Say hi."]
    completions = ["Hello there, Good Morning", "Hi", "Greetings, Friend Zed", "1 2 3", "one", "Hey"]
    rubric = [GREETING] * 3 + [COUNTING] * 2 + [GREETING]
    values = reward(prompts=prompts, completions=completions, rubric=rubric)
    hello = rubrics.score_group([as_messages(p, c) for p, c in zip(prompts[:3], completions[:3])], GREETING,
                                judge=judge, comparisons=1)
    assert values[:3] == [r.score for r in hello]
    assert values[3:5] == [rubrics.score(as_messages(p, c), COUNTING).score for p, c in zip(prompts[3:5],
                                                                                           completions[3:5])]
    alone = reward.last_results[5]
    assert all(item.group is None for item in alone.items)   # the only completion of its prompt
    assert [i.group.attempts for r in reward.last_results[:3] for i in r.items if i.method == "judge"] == [3, 3, 3]
    with pytest.raises(ValueError, match="comparisons: applies to group=True"):
        rubric_reward(judge=judge, comparisons=2)
