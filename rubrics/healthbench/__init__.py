"""HealthBench: its examples as rubrics and trajectories (convert.py), and its aggregate figures over our results
(aggregate.py), computed the way openai/simple-evals' healthbench_eval.py computes them."""
