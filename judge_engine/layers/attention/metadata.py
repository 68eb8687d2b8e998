"""Per-step attention metadata shared by the torch path and the Triton kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class AttentionMetadata:
    """Describes one flat batch of new tokens and where their keys/values live in the paged KV cache.

    A slot is ``block_id * block_size + offset``. The query tokens of sequence ``b`` are
    ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` of the flat batch; they are the last tokens of its context.
    """

    slot_mapping: torch.Tensor  # int64 [T]: cache slot of each new token; -1 = padding, never written
    cu_seqlens_q: torch.Tensor  # int32 [B+1]: offsets of each sequence's query tokens in the flat batch
    context_lens: torch.Tensor  # int32 [B]: keys per sequence after this step = cached prefix + new tokens
    block_tables: torch.Tensor  # int32 [B, max_blocks], -1 padded
    max_seqlen_q: int
    max_context_len: int
    is_decode: bool  # every sequence has exactly one query token
    # What a backend derives from this metadata once per step and reuses in every layer (its own keys).
    backend_cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_seqs(self) -> int:
        return int(self.context_lens.shape[0])

    def for_rows(self, rows: torch.Tensor, positions: torch.Tensor) -> "AttentionMetadata":
        """The attention of the flat-batch tokens ``rows`` alone (in that order), each over its own sequence's keys:
        for a layer whose other rows nobody reads (their keys and values, stored with this metadata, are all the
        attention reads). Rows that follow each other in one sequence form one query run (the choice tokens of a
        scored statement), the others are one-token queries. A query's result depends only on its position and
        keys, so each row gets exactly what it gets among all the step's queries."""
        count = int(rows.shape[0])
        sequences = torch.searchsorted(self.cu_seqlens_q[1:], rows.to(self.cu_seqlens_q.dtype), right=True)
        starts_run = torch.ones(count, dtype=torch.bool, device=rows.device)
        starts_run[1:] = (rows[1:] != rows[:-1] + 1) | (sequences[1:] != sequences[:-1])
        run_starts = starts_run.nonzero().squeeze(1)
        run_ends = torch.cat([run_starts[1:], run_starts.new_tensor([count])])
        lengths = run_ends - run_starts
        cu_seqlens_q = torch.zeros(lengths.shape[0] + 1, dtype=self.cu_seqlens_q.dtype, device=rows.device)
        torch.cumsum(lengths, 0, out=cu_seqlens_q[1:])
        last_rows = rows.index_select(0, run_ends - 1) if count else rows
        context_lens = (positions.index_select(0, last_rows) + 1).to(self.context_lens.dtype)
        longest = int(lengths.max()) if count else 0
        return AttentionMetadata(
            slot_mapping=self.slot_mapping.index_select(0, rows),
            cu_seqlens_q=cu_seqlens_q,
            context_lens=context_lens,
            block_tables=self.block_tables.index_select(0, sequences.index_select(0, run_starts)),
            max_seqlen_q=longest,
            max_context_len=int(context_lens.max()) if count else 0,
            is_decode=longest == 1,
        )
