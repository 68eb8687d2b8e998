"""Paged attention: metadata, the torch reference path and backend selection."""

import os

# MKL picks its matmul kernel (and so its summation order) from the matrix shapes and the thread
# count, so a token's activations would change in the last bits with the number of other tokens in
# the step. Conditional numerical reproducibility in strict mode makes each row's result independent
# of the others. MKL reads this once, at its first call, so it must be set before any matmul runs;
# a value chosen by the user is kept.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from judge_engine.attention.backend import AttentionBackend, get_backend  # noqa: E402
from judge_engine.attention.metadata import AttentionMetadata  # noqa: E402

__all__ = ["AttentionBackend", "AttentionMetadata", "get_backend"]
