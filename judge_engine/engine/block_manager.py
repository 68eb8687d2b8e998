"""The KV cache's block pool: allocation, refcounts, the prefix cache over full blocks, and every sequence's
block table.

The scheduler only asks (as vLLM's KV-cache manager is asked): the blocks the prefix cache holds for a sequence
(computed_blocks), room for n more tokens (allocate_slots), the blocks a scheduled step fills
(register_full_blocks, mark_computed), and giving a sequence's blocks back (free_sequence). Block tables and
their hash chains live here; the model runner reads a sequence's table through block_table().

Samples of one request (n, best_of) and beams share blocks: fork() gives a sibling every block of its parent
(refcounts); a shared block that a sequence is about to write into (the prompt's partial last block) is copied on
write, and take_copies() tells the step which blocks' keys and values to copy before its model run.

A full block is registered under a hash chained over its parent's hash and its own token ids as soon as the
step that fills it is scheduled, so that a request arriving later finds it, even one admitted to that same step
(each layer writes the whole step's keys and values before any attention reads them). A hash is only an index: a hit is
verified against the block's stored token ids and its parent block (id and generation), so a collision can
never hand a sequence another prefix's keys and values. Freed blocks that carry a hash stay in an LRU queue
and are reused by later requests with the same prefix until allocation needs them back.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from judge_engine.engine.sequence import Sequence


def block_hash(parent_hash: int | None, token_ids: tuple[int, ...]) -> int:
    """Chained hash of a full block (tests monkeypatch it to force collisions)."""
    return hash((parent_hash, token_ids))


@dataclass(eq=False)
class Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] = ()
    parent: tuple[int, int] | None = None  # (block_id, generation) of the previous block of its sequence
    generation: int = 0                     # bumped each time the block is handed out for new content
    computed: bool = False                  # its keys/values are in the cache (the step that fills it has run)


@dataclass
class PrefixMatch:
    block_ids: list[int]
    hashes: list[int]
    pending: bool  # some matched blocks are filled by the step being scheduled (their step has not run yet)

    def num_tokens(self, block_size: int) -> int:
        return len(self.block_ids) * block_size


@dataclass
class SequenceBlocks:
    """One sequence's blocks, in order, and the chained hash of each full one that has been registered."""
    block_ids: list[int] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)


class NoFreeBlocks(RuntimeError):
    """Raised by allocate() when the pool cannot satisfy the request (callers check can_allocate first)."""


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self._free_plain: list[int] = list(range(num_blocks - 1, -1, -1))  # no hash: reused first
        self._evictable: OrderedDict[int, None] = OrderedDict()            # refcount 0, hashed: LRU order
        self._by_hash: dict[int, int] = {}
        self.num_used = 0  # blocks with refcount > 0
        self.num_copied_blocks = 0  # copies on write so far (a forked sibling wrote into a shared block)
        self._copies: list[tuple[int, int]] = []  # decided copies the next step must make (take_copies)
        self._sequences: dict[Sequence, SequenceBlocks] = {}  # Sequence hashes by identity (eq=False)

    # -- a sequence's blocks: what the scheduler asks --------------------------------------------------
    def computed_blocks(self, seq: Sequence) -> PrefixMatch:
        """The longest chain of cached full blocks that the sequence may take instead of computing them
        (nothing is acquired yet)."""
        return self.match_prefix(seq.token_ids, seq.max_cacheable_tokens)

    def allocate_slots(self, seq: Sequence, num_new_tokens: int, computed: PrefixMatch | None = None) -> bool:
        """Room for `num_new_tokens` tokens after the sequence's computed ones and, on admission, after the
        cached blocks `computed` (which it then holds). A block those tokens go into that a forked sibling shares
        is first copied (copy on write; take_copies() hands the copies to the step). False when the pool cannot:
        a running sequence keeps what it had, an admission holds nothing (its cached blocks are released again)."""
        blocks = self._sequences.get(seq)
        if blocks is None:
            blocks = self._sequences[seq] = SequenceBlocks()
        if computed is not None:
            self.acquire(computed.block_ids)
            blocks.block_ids.extend(computed.block_ids)
            blocks.hashes.extend(computed.hashes)
        num_tokens = seq.num_computed_tokens + (computed.num_tokens(self.block_size) if computed else 0)
        needed = max(-(-(num_tokens + num_new_tokens) // self.block_size) - len(blocks.block_ids), 0)
        shared = self._shared_blocks_written(blocks, num_tokens, num_new_tokens) if computed is None else []
        if needed + len(shared) == 0:
            return True
        if not self.can_allocate(needed + len(shared)):
            if computed is not None:
                self.free_sequence(seq)
            return False
        self._copy_on_write(blocks, shared)
        blocks.block_ids.extend(self.allocate(needed))
        return True

    def register_full_blocks(self, seq: Sequence, num_tokens: int) -> None:
        """Record in the prefix cache every block that the sequence's first `num_tokens` tokens fill, once the step
        filling them is scheduled (not after it runs, so that later arrivals find them at once)."""
        blocks = self._sequences[seq]
        for index in range(len(blocks.hashes), num_tokens // self.block_size):
            blocks.hashes.append(self._register_full_block(blocks, index, seq.token_ids))

    def mark_computed(self, seq: Sequence, start: int, end: int) -> None:
        """The step that computed tokens [start, end) ran: the full blocks it completed can be served to others."""
        for block_id in self._sequences[seq].block_ids[start // self.block_size:end // self.block_size]:
            self.blocks[block_id].computed = True

    def free_sequence(self, seq: Sequence) -> None:
        """Give back one reference to each of the sequence's blocks (none held is fine: it may never have run)."""
        blocks = self._sequences.pop(seq, None)
        if blocks is not None:
            self.free(blocks.block_ids)

    def free_blocks_outside_window(self, seq: Sequence, window: int) -> int:
        """Give back the sequence's blocks that lie entirely left of the sliding window of every query still to
        come (a model whose every layer attends only the last `window` keys never reads them again); their table
        entries become -1, which the attention paths never read. Returns how many blocks were given back.

        The block before the first one not yet indexed in the prefix cache is kept: its registration reads it."""
        blocks = self._sequences.get(seq)
        if blocks is None:
            return 0
        # the next query sits at num_computed_tokens and sees keys from num_computed_tokens - window + 1 on
        count = min(max(0, seq.num_computed_tokens - window + 1) // self.block_size, len(blocks.hashes) - 1)
        freed = [block_id for block_id in blocks.block_ids[:max(count, 0)] if block_id >= 0]
        if freed:
            self.free(freed)
            blocks.block_ids[:count] = [-1] * count
        return len(freed)

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """The child shares all of the parent's blocks (one more reference each, hash chain included); whichever of
        them writes into a shared block later gets its own copy first (allocate_slots)."""
        source = self._sequences[parent]
        self.acquire([block_id for block_id in source.block_ids if block_id >= 0])  # -1: left of a sliding window
        self._sequences[child] = SequenceBlocks(list(source.block_ids), list(source.hashes))

    def take_copies(self) -> list[tuple[int, int]]:
        """The (source, destination) block copies decided since the last call: the step being scheduled must make
        them before its model run writes into the destinations."""
        copies, self._copies = self._copies, []
        return copies

    def _shared_blocks_written(self, blocks: SequenceBlocks, start: int, num_new_tokens: int) -> list[int]:
        """Indices of the sequence's blocks that positions [start, start + num_new_tokens) write and that another
        sequence also holds (forked siblings share the prompt's partial last block until one of them writes)."""
        if num_new_tokens <= 0:
            return []
        first = start // self.block_size
        last = min(-(-(start + num_new_tokens) // self.block_size), len(blocks.block_ids))
        return [i for i in range(first, last) if self.blocks[blocks.block_ids[i]].ref_count > 1]

    def _copy_on_write(self, blocks: SequenceBlocks, indices: list[int]) -> None:
        for index in indices:
            source = blocks.block_ids[index]
            copy = self._take_free_block()
            self.free([source])  # still held by its other owners: the last writer keeps the original
            blocks.block_ids[index] = copy
            self._copies.append((source, copy))
            self.num_copied_blocks += 1

    def block_table(self, seq: Sequence) -> list[int]:
        """The sequence's block ids in order (the list itself, for the step being prepared: read, never edit)."""
        blocks = self._sequences.get(seq)
        return blocks.block_ids if blocks is not None else []

    # -- pool -----------------------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return len(self._free_plain) + len(self._evictable)

    def can_allocate(self, n: int) -> bool:
        return n <= self.num_free_blocks

    def allocate(self, n: int) -> list[int]:
        if n > self.num_free_blocks:
            raise NoFreeBlocks(f"need {n} blocks, {self.num_free_blocks} free")
        return [self._take_free_block() for _ in range(n)]

    def _take_free_block(self) -> int:
        if self._free_plain:
            block_id = self._free_plain.pop()
        else:
            block_id, _ = self._evictable.popitem(last=False)
            self._forget_hash(self.blocks[block_id])
        block = self.blocks[block_id]
        block.ref_count = 1
        block.generation += 1
        block.token_ids = ()
        block.parent = None
        block.computed = False
        self.num_used += 1
        return block_id

    def free(self, block_table: list[int]) -> None:
        """Drop one reference to each block; the tail is queued first so that shared heads live longest."""
        for block_id in reversed(block_table):
            if block_id < 0:
                continue  # left of a sliding window, given back already (free_blocks_outside_window)
            block = self.blocks[block_id]
            if block.ref_count <= 0:
                raise AssertionError(f"block {block_id} freed with ref_count {block.ref_count}")
            block.ref_count -= 1
            if block.ref_count == 0:
                self.num_used -= 1
                if block.hash is not None and block.computed:
                    self._evictable[block_id] = None
                else:
                    # never computed (aborted or preempted before its step ran): its content is not in the cache
                    self._forget_hash(block)
                    self._free_plain.append(block_id)

    def _forget_hash(self, block: Block) -> None:
        if block.hash is not None and self._by_hash.get(block.hash) == block.block_id:
            del self._by_hash[block.hash]
        block.hash = None

    # -- prefix cache ----------------------------------------------------------------------------------
    def match_prefix(self, token_ids: list[int], max_tokens: int) -> PrefixMatch:
        """The longest chain of cached full blocks covering token_ids[:max_tokens], including blocks that the
        step being scheduled fills (nothing is acquired yet)."""
        match = PrefixMatch([], [], pending=False)
        if not self.enable_prefix_caching:
            return match
        bs = self.block_size
        parent_hash: int | None = None
        parent_ref: tuple[int, int] | None = None
        for index in range(max_tokens // bs):
            tokens = tuple(token_ids[index * bs:(index + 1) * bs])
            h = block_hash(parent_hash, tokens)
            block_id = self._by_hash.get(h)
            if block_id is None:
                break
            block = self.blocks[block_id]
            if block.token_ids != tokens or block.parent != parent_ref:
                break  # hash collision: a different prefix lives under this hash
            match.pending = match.pending or not block.computed
            match.block_ids.append(block_id)
            match.hashes.append(h)
            parent_hash, parent_ref = h, (block_id, block.generation)
        return match

    def acquire(self, block_ids: list[int]) -> None:
        for block_id in block_ids:
            if block_id < 0:
                continue  # left of a sliding window, given back already (free_blocks_outside_window)
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self._evictable[block_id]
                self.num_used += 1
            block.ref_count += 1

    def _register_full_block(self, blocks: SequenceBlocks, index: int, token_ids: list[int]) -> int:
        """Index block `index` of a sequence (now full, its step scheduled) under its chained hash, unless another
        block holds that hash already; returns the hash, from which the chain continues."""
        bs = self.block_size
        tokens = tuple(token_ids[index * bs:(index + 1) * bs])
        parent_hash = blocks.hashes[index - 1] if index > 0 else None
        h = block_hash(parent_hash, tokens)
        if not self.enable_prefix_caching:
            return h
        block = self.blocks[blocks.block_ids[index]]
        if block.hash is not None:
            return h  # matched from the cache: already registered
        block.token_ids = tokens
        if index > 0:
            parent = self.blocks[blocks.block_ids[index - 1]]
            block.parent = (parent.block_id, parent.generation)
            if parent.hash != parent_hash:
                return h  # the parent is a private duplicate: nobody could match through it
        if h not in self._by_hash:  # a duplicate or colliding block stays private to its sequence
            block.hash = h
            self._by_hash[h] = block.block_id
        return h

    def reset_prefix_cache(self) -> None:
        """Forget every evictable cached block (blocks in use keep their hashes)."""
        while self._evictable:
            block_id, _ = self._evictable.popitem(last=False)
            self._forget_hash(self.blocks[block_id])
            self._free_plain.append(block_id)

    # -- checks ----------------------------------------------------------------------------------------
    def check_invariants(self, block_tables: list[list[int]] | None = None) -> None:
        """Raise AssertionError if the pool's bookkeeping is inconsistent (used by tests). The references are
        counted against `block_tables`, by default the tables of the sequences this manager holds."""
        if block_tables is None:
            block_tables = [blocks.block_ids for blocks in self._sequences.values()]
        for blocks in self._sequences.values():
            assert len(blocks.hashes) <= len(blocks.block_ids), "more registered hashes than blocks"
        free_plain = set(self._free_plain)
        evictable = set(self._evictable)
        assert len(free_plain) == len(self._free_plain), "a block is twice in the free list"
        assert not (free_plain & evictable), "a block is both plain-free and evictable"
        for block in self.blocks:
            assert block.ref_count >= 0, f"block {block.block_id} has ref_count {block.ref_count}"
            is_free = block.block_id in free_plain or block.block_id in evictable
            assert is_free == (block.ref_count == 0), f"block {block.block_id} free={is_free} rc={block.ref_count}"
            if block.block_id in evictable:
                assert block.hash is not None and block.computed, f"evictable block {block.block_id} has no content"
            if block.block_id in free_plain:
                assert block.hash is None, f"plain-free block {block.block_id} still indexed"
        for h, block_id in self._by_hash.items():
            assert self.blocks[block_id].hash == h, f"hash index points at block {block_id} with another hash"
        assert self.num_used == sum(b.ref_count > 0 for b in self.blocks)
        counts: dict[int, int] = {}
        for table in block_tables:
            for block_id in table:
                counts[block_id] = counts.get(block_id, 0) + 1
        for block in self.blocks:
            assert counts.get(block.block_id, 0) == block.ref_count, (
                f"block {block.block_id}: ref_count {block.ref_count}, in {counts.get(block.block_id, 0)} tables")
