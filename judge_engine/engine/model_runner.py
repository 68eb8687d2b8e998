"""Runs one scheduled step: flattens every sequence's new tokens into one batch, runs the model once, and
computes logits only at the positions that need them (the last prompt position of a finished prefill, each
decode, and the prompt positions whose log-probabilities were asked for); keeps the hidden states of the rows
and layers that sequences asked for (HiddenCapture), when any did."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from judge_engine.layers.attention.metadata import AttentionMetadata
from judge_engine.engine.kv_cache import copy_blocks
from judge_engine.engine.scheduler import ScheduledSequence
from judge_engine.models.hidden_capture import HiddenCapture

# per scheduled sequence: position -> float32 CPU [len(seq.hidden_layers), H] for its rows computed this step
HiddenRows = list[dict[int, torch.Tensor]]


@dataclass
class PreparedBatch:
    input_ids: torch.Tensor        # int64 [T]
    positions: torch.Tensor        # int64 [T]
    meta: AttentionMetadata
    logits_rows: torch.Tensor      # int64 [N]: rows of the flat batch whose logits are computed
    row_positions: list[list[int]]  # per scheduled sequence: the positions of its logits rows, in order
    capture_rows: list[int]        # flat rows whose hidden states are kept (ascending), per sequence in order
    capture_positions: list[list[int]]  # per scheduled sequence: the positions of its capture rows
    capture_layers: tuple[int, ...]  # every layer some sequence of the step asks for, ascending


def prepare_batch(scheduled: list[ScheduledSequence], block_size: int, device: torch.device) -> PreparedBatch:
    num_seqs = len(scheduled)
    starts = np.fromiter((s.start for s in scheduled), dtype=np.int64, count=num_seqs)
    q_lens = np.fromiter((s.num_new_tokens for s in scheduled), dtype=np.int64, count=num_seqs)
    cu_q = np.zeros(num_seqs + 1, dtype=np.int64)
    np.cumsum(q_lens, out=cu_q[1:])
    total = int(cu_q[-1])
    context_lens = starts + q_lens

    token_ids: list[int] = []
    for item in scheduled:
        token_ids.extend(item.seq.token_ids[item.start:item.end])
    # position of each flat token: its sequence's start plus its offset inside the sequence's query
    seq_of_token = np.repeat(np.arange(num_seqs), q_lens)
    positions = np.arange(total, dtype=np.int64) - cu_q[:-1][seq_of_token] + starts[seq_of_token]

    max_blocks = max(len(item.block_table) for item in scheduled)
    tables = np.full((num_seqs, max_blocks), -1, dtype=np.int64)
    for row, item in enumerate(scheduled):
        tables[row, :len(item.block_table)] = item.block_table
    slots = tables[seq_of_token, positions // block_size] * block_size + positions % block_size

    logits_rows: list[int] = []
    row_positions: list[list[int]] = []
    capture_rows: list[int] = []
    capture_positions: list[list[int]] = []
    capture_layers: set[int] = set()
    for row, item in enumerate(scheduled):
        wanted = item.seq.needs_logits_rows(item.start, item.end)
        row_positions.append(wanted)
        base = int(cu_q[row]) - item.start
        logits_rows.extend(base + p for p in wanted)
        hidden = item.seq.hidden_positions_in(item.start, item.end)
        capture_positions.append(hidden)
        if hidden:
            capture_rows.extend(base + p for p in hidden)
            capture_layers.update(item.seq.hidden_layers)

    meta = AttentionMetadata(
        slot_mapping=torch.from_numpy(slots).to(device),
        cu_seqlens_q=torch.from_numpy(cu_q.astype(np.int32)).to(device),
        context_lens=torch.from_numpy(context_lens.astype(np.int32)).to(device),
        block_tables=torch.from_numpy(tables.astype(np.int32)).to(device),
        max_seqlen_q=int(q_lens.max()),
        max_context_len=int(context_lens.max()),
        is_decode=bool((q_lens == 1).all()),
    )
    return PreparedBatch(
        input_ids=torch.tensor(token_ids, dtype=torch.int64, device=device),
        positions=torch.from_numpy(positions).to(device),
        meta=meta,
        logits_rows=torch.tensor(logits_rows, dtype=torch.int64, device=device),
        row_positions=row_positions,
        capture_rows=capture_rows,
        capture_positions=capture_positions,
        capture_layers=tuple(sorted(capture_layers)),
    )


class ModelRunner:
    def __init__(self, model: torch.nn.Module, kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
                 block_size: int, device: torch.device) -> None:
        self.model = model
        self.kv_caches = kv_caches
        self.block_size = block_size
        self.device = device
        self.model_time_s = 0.0

    @torch.inference_mode()
    def copy_blocks(self, pairs: list[tuple[int, int]]) -> None:
        """The step's copies on write, before its model run writes into their destinations."""
        copy_blocks(self.kv_caches, pairs)

    @torch.inference_mode()
    def execute(self, scheduled: list[ScheduledSequence]) -> tuple[torch.Tensor, list[list[int]], HiddenRows | None]:
        """float32 logits [N, V] for the wanted positions, those positions per scheduled sequence, and the hidden
        states the sequences asked for at the positions computed this step (None when none did)."""
        batch = prepare_batch(scheduled, self.block_size, self.device)
        started = time.perf_counter()
        capture = None
        if batch.capture_rows:
            capture = HiddenCapture(torch.tensor(batch.capture_rows, dtype=torch.int64, device=self.device),
                                    batch.capture_layers)
            hidden = self.model(batch.input_ids, batch.positions, batch.meta, self.kv_caches, batch.logits_rows,
                                capture=capture)
        else:
            hidden = self.model(batch.input_ids, batch.positions, batch.meta, self.kv_caches, batch.logits_rows)
        if batch.logits_rows.numel():
            logits = self.model.compute_logits(hidden).float()
        else:
            logits = hidden.new_zeros((0, 0), dtype=torch.float32)
        if self.device.type == "cuda":
            logits = logits.cpu()
        hidden_rows = None if capture is None else _hidden_rows(scheduled, batch, capture.collected())
        self.model_time_s += time.perf_counter() - started
        return logits, batch.row_positions, hidden_rows


def _hidden_rows(scheduled: list[ScheduledSequence], batch: PreparedBatch, collected: torch.Tensor) -> HiddenRows:
    """The step's captured rows [R, len(batch.capture_layers), H] split into each sequence's positions and layers
    (in the order it asked for them), float32 on the CPU; each sequence gets copies of its own rows only."""
    collected = collected.float().cpu()
    slot = {layer: i for i, layer in enumerate(batch.capture_layers)}
    per_sequence: HiddenRows = []
    row = 0
    for item, positions in zip(scheduled, batch.capture_positions):
        if not positions:
            per_sequence.append({})
            continue
        columns = torch.tensor([slot[layer] for layer in item.seq.hidden_layers], dtype=torch.int64)
        block = collected[row:row + len(positions)].index_select(1, columns)  # a copy: this sequence's rows alone
        row += len(positions)
        per_sequence.append(dict(zip(positions, block.unbind(0))))
    return per_sequence
