"""Paged attention: metadata, the torch reference path and backend selection.

Bit-exact batch invariance of the torch path comes from fixed-shape calls: 32-row query tiles here, row tiles
for the model's products (judge_engine/layers/row_tiles.py).
"""

from judge_engine.layers.attention.backend import AttentionBackend, get_backend
from judge_engine.layers.attention.metadata import AttentionMetadata

__all__ = ["AttentionBackend", "AttentionMetadata", "get_backend"]
