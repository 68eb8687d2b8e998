"""Grading: jobs, the sync and async scoring paths, dispatch to judges, batching, datasets and expectations."""
