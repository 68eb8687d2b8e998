"""Paged attention: metadata, the torch reference path and backend selection.

Bit-exact batch invariance of the torch path relies on MKL_CBWR, set by judge_engine/__init__.py.
"""

from judge_engine.attention.backend import AttentionBackend, get_backend
from judge_engine.attention.metadata import AttentionMetadata

__all__ = ["AttentionBackend", "AttentionMetadata", "get_backend"]
