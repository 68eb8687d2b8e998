"""Engine-wide counters; LLM.stats() returns them as a dict: the fields below, plus prefix_cache_hit_rate and
kv_slots_unused_at_peak_fraction."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class EngineStats:
    kv_blocks_total: int = 0
    block_size: int = 0
    requests: int = 0
    finished_requests: int = 0
    failed_requests: int = 0
    aborted_requests: int = 0
    prompt_tokens: int = 0            # tokens of every admitted request's prompt
    computed_prompt_tokens: int = 0   # prompt tokens that went through the model the first time
    cached_prompt_tokens: int = 0     # prompt tokens served by the prefix cache instead
    recomputed_tokens: int = 0        # tokens run again after a preemption
    generated_tokens: int = 0
    preemptions: int = 0
    steps: int = 0
    batched_tokens: int = 0           # all tokens through the model (prompt, recompute, decode)
    attention_pairs: int = 0          # (query, key) pairs attended: the attention share of the FLOPs
    logits_rows: int = 0              # rows through the LM head (only the positions that need logits)
    kv_blocks_peak: int = 0           # most blocks referenced by live sequences at once
    kv_slots_unused_at_peak: int = 0  # allocated-but-empty slots (tails of last blocks) at that peak
    kv_seqs_at_peak: int = 0          # live sequences at that peak
    model_time_s: float = 0.0         # wall time inside the model forward and logits

    def as_dict(self) -> dict:
        data = asdict(self)
        data["prefix_cache_hit_rate"] = (self.cached_prompt_tokens / self.prompt_tokens
                                         if self.prompt_tokens else 0.0)
        peak_slots = self.kv_blocks_peak * self.block_size
        data["kv_slots_unused_at_peak_fraction"] = (self.kv_slots_unused_at_peak / peak_slots
                                                    if peak_slots else 0.0)
        return data
