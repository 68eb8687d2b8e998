"""How one step's token budget is shared between the running sequences, so that a short request is not stuck
behind a long prompt.

A decode needs one token a step and a short prompt a few; a long prompt could fill the whole budget by itself
for many steps. Three rules, in order:

- **short ones first**: a sequence with at most `long_prefill_tokens` tokens left to compute (every decode, a
  short prompt) gets all of them;
- **a short step stays short**: while a step serves a short one, a long prompt computes at most
  `long_prefill_tokens` of its tokens in it (on a CPU a step costs about what its tokens cost, so a 2,048-token
  chunk beside a one-token decode would make that decode wait as long as the chunk);
- **long ones share the rest evenly**: what is left of the budget, less the room kept for newcomers, is split
  between the long prompts, each taking no more than it needs (water filling), so two long prompts progress
  side by side instead of one after the other.

A step with no short sequence and no newcomer gives its whole budget to the long prompts, as before: a batch of
judge prompts (no decodes) is scheduled as it always was.
"""

from __future__ import annotations


def share_step(demands: list[int], room: int, long_prefill_tokens: int, short_newcomer: bool = False) -> list[int]:
    """Tokens each running sequence computes this step, in the order of `demands` (the tokens each has left).
    room: the budget less what is kept for newcomers; short_newcomer: a short request joins this step."""
    shares = [0] * len(demands)
    short = [i for i, need in enumerate(demands) if 0 < need <= long_prefill_tokens]
    long = [i for i, need in enumerate(demands) if need > long_prefill_tokens]
    for i in short:
        shares[i] = min(demands[i], max(room, 0))
        room -= shares[i]
    capped = {i: min(demands[i], long_prefill_tokens) if (short or short_newcomer) else demands[i] for i in long}
    for position, i in enumerate(sorted(long, key=lambda j: capped[j])):
        even = max(room, 0) // (len(long) - position)
        shares[i] = min(capped[i], even)
        room -= shares[i]
    for i in sorted(long):   # what the even split left over (a remainder, or a capped one's part) in admission order
        extra = min(capped[i] - shares[i], max(room, 0))
        shares[i] += extra
        room -= extra
    return shares
