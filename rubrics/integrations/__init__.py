"""Grading where trajectories are made: RL trainers, eval harnesses, batch pipelines and task runners.

| module | gives | extra |
|---|---|---|
| rubrics.integrations.trl | `rubric_reward(...)`: a GRPOTrainer reward function | `[trl]` |
| rubrics.integrations.verifiers | `rubric_reward(...)`: a weighted `@vf.reward` for verifiers tasks | `[verifiers]` |
| rubrics.integrations.inspect | `rubric_scorer(rubric)`: an Inspect AI scorer | `[inspect]` |
| rubrics.integrations.ray | `RubricGrader`: a callable class for `ray.data.Dataset.map_batches` | `[ray]` |
| rubrics.integrations.reward_json | `write_reward_json(...)`: the reward.json of Harbor/Terminal-Bench runners | none |

Nothing here is imported by `import rubrics`; each module imports its framework when first used and says which
extra to install when it is missing. Every integration turns an incomplete result (an item not evaluated, a
trajectory that did not load) into an error by default, never into a reward of 0.0: see `on_error`.
"""
