"""Grading: jobs, the sync and async scoring paths, batching, datasets, expectations and results."""
