"""Token embeddings looked up in a table that is a float tensor, or an object that reads rows on demand (a GGUF's
quantized blocks, judge_engine/loading/weight_source.py) so that the whole table is never held in float."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def embedding(input_ids: torch.Tensor, table) -> torch.Tensor:
    if isinstance(table, torch.Tensor):
        return F.embedding(input_ids, table)
    return table.rows(input_ids)
