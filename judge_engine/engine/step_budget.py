"""How one step's token budget is shared between the running sequences, so that a short request is not stuck
behind a long prompt.

A decode needs one token a step and a short prompt a few; a long prompt could fill the whole budget by itself
for many steps. Three rules, in order:

- **short ones first**: a sequence with at most SHORT_REQUEST_CHUNKS x `long_prefill_tokens` tokens left to
  compute (every decode, a short prompt, the tail of a prompt whose prefix is cached) gets all of them;
- **a short step stays short**: while a step serves a short request (one that is decoding, or has at most a few
  chunks of prompt left: SHORT_REQUEST_CHUNKS), a long prompt computes at most
  `long_prefill_tokens` tokens' worth in it. On a CPU a step costs about what its tokens cost, so a 2,048-token
  chunk beside a one-token decode would make that decode wait as long as the chunk. In a batch of judge prompts
  the criteria's tails are such short work: a long prefix beside them goes in small chunks, while the newcomers
  admitted beside them fill the budget, so the steps stay full;
- **long ones share the rest evenly**: what is left of the budget, less the room kept for newcomers, is split
  between the long prompts, each taking no more than it needs (water filling), so two long prompts progress
  side by side instead of one after the other.

A long prompt's tokens are counted at what they cost: a token at position p attends to p keys, so it costs
1 + p / break_even tokens at the start of a prompt, where break_even is the context length at which a token's
attention costs as much as its linear maps (about 3,000 for SmolLM2-135M, 15,000 for Qwen2.5-1.5B). Deep in an
8k-token prompt a chunk takes fewer tokens, and a step costs what its budget says wherever the prompt stands.
"""

from __future__ import annotations

# A request with at most this many long-prefill chunks of prompt left is short: it is computed whole, and the
# steps it shares stay short.
SHORT_REQUEST_CHUNKS = 4


def share_step(demands: list[int], room: int, long_prefill_tokens: int, serves_short_request: bool = False,
               positions: list[int] | None = None, break_even: int | None = None) -> list[int]:
    """Tokens each running sequence computes this step, in the order of `demands` (the tokens each has left).
    room: the budget less what is kept for newcomers; serves_short_request: a decoding or short request is in
    this step (running, or joining it); positions: the tokens each has computed, which with break_even make a
    long prompt's tokens cost more the deeper they are (None: every token costs one)."""
    shares = [0] * len(demands)
    short_work = SHORT_REQUEST_CHUNKS * long_prefill_tokens
    short = [i for i, need in enumerate(demands) if 0 < need <= short_work]
    long = [i for i, need in enumerate(demands) if need > short_work]
    for i in short:
        shares[i] = min(demands[i], max(room, 0))
        room -= shares[i]
    factor = {i: 1.0 + (positions[i] / break_even if positions and break_even else 0.0) for i in long}
    wanted = {i: demands[i] * factor[i] for i in long}   # in tokens at the start of a prompt
    capped = {i: min(wanted[i], long_prefill_tokens) if serves_short_request else wanted[i] for i in long}
    cost = {i: 0.0 for i in long}
    for place, i in enumerate(sorted(long, key=lambda j: capped[j])):
        cost[i] = min(capped[i], max(room, 0) / (len(long) - place))
        room -= cost[i]
    for i in sorted(long):   # what the even split left over (a capped one's part) goes in admission order
        extra = min(capped[i] - cost[i], max(room, 0))
        cost[i] += extra
        room -= extra
    for i in long:   # whole tokens, at least one where there was room for any, never more than it needs
        shares[i] = min(demands[i], max(int(cost[i] / factor[i]), 1 if cost[i] >= 1 else 0))
    return shares


def attention_break_even(spec) -> int | None:
    """The context length at which a token's attention (4 x query width flops per key and layer) costs as much
    as its linear maps (2 flops per weight of a layer), from a model's config; None when the config lacks a size."""
    weights = spec.layer_weights()
    if weights is None:
        return None
    query = spec.num_heads * spec.head_dim
    return max(1, round(2 * weights / (4 * query)))
