"""Paged attention: metadata, the torch reference path and backend selection."""

from judge_engine.attention.backend import AttentionBackend, get_backend
from judge_engine.attention.metadata import AttentionMetadata

__all__ = ["AttentionBackend", "AttentionMetadata", "get_backend"]
