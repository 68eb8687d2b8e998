"""How one step's token budget is shared between the running sequences, so that a short request is not stuck
behind a long prompt.

A decode needs one token a step and a short prompt a few; a long prompt could fill the whole budget by itself
for many steps. Three rules, in order:

- **short ones first**: a sequence with at most `long_prefill_tokens` tokens left to compute (every decode, the
  tail of a prompt whose prefix is cached) gets all of them;
- **a short step stays short**: while a step serves a short *request* (one that is decoding, or whose whole
  prompt is short), a long prompt computes at most `long_prefill_tokens` of its tokens in it. On a CPU a step
  costs about what its tokens cost, so a 2,048-token chunk beside a one-token decode would make that decode wait
  as long as the chunk. The tail of a long judge prompt whose prefix is cached is short work but not a short
  request: a batch of judge prompts (no decodes) fills its steps as it always did;
- **long ones share the rest evenly**: what is left of the budget, less the room kept for newcomers, is split
  between the long prompts, each taking no more than it needs (water filling), so two long prompts progress
  side by side instead of one after the other.
"""

from __future__ import annotations


def share_step(demands: list[int], room: int, long_prefill_tokens: int, serves_short_request: bool = False) -> list[int]:
    """Tokens each running sequence computes this step, in the order of `demands` (the tokens each has left).
    room: the budget less what is kept for newcomers; serves_short_request: a decoding or short request is in
    this step (running, or joining it)."""
    shares = [0] * len(demands)
    short = [i for i, need in enumerate(demands) if 0 < need <= long_prefill_tokens]
    long = [i for i, need in enumerate(demands) if need > long_prefill_tokens]
    for i in short:
        shares[i] = min(demands[i], max(room, 0))
        room -= shares[i]
    capped = {i: min(demands[i], long_prefill_tokens) if serves_short_request else demands[i] for i in long}
    for position, i in enumerate(sorted(long, key=lambda j: capped[j])):
        even = max(room, 0) // (len(long) - position)
        shares[i] = min(capped[i], even)
        room -= shares[i]
    for i in sorted(long):   # what the even split left over (a remainder, or a capped one's part) in admission order
        extra = min(capped[i] - shares[i], max(room, 0))
        shares[i] += extra
        room -= extra
    return shares
