"""Judge prompts as token ids: the model's chat template cut into trusted pieces, untrusted text encoded apart.

The template is rendered once with sentinel contents and split around them (chat_layout), so the pieces between
turns carry the template's own special tokens (parsed, because they come from the template), while the text
between them is encoded with special-token parsing off.

Prefix-preserving tokenization rules (the one place they are written; rubrics/judges/prompt/ids.py applies them,
tests/rubrics/test_judge_prompts.py::test_the_prefix_preserving_tokenization_rules breaks when one is broken).
A prompt is three segments: instructions, a trajectory's context (task, reference, fenced evidence), an item
segment (then the answer choices, encoded on their own). The engine's prefix cache shares what is
token-identical at the start of prompts, so:

1. Each segment is encoded on its own, as ONE string, and the segments' ids are concatenated, never re-tokenized
   together: nothing after a segment can change its ids.
2. The instructions segment (template head + instructions + the template up to the user text) depends on the
   instructions text alone: it is the same for every trajectory and item a method asks about.
3. A trajectory's context is encoded once per (context, instructions, content-free) group and, when it must be
   cut, cut once, to the room the group's tightest item leaves, so every item of the trajectory gets the same
   context ids, cut or not; an item that leaves no room for a minimal context errs alone.
4. The segments split the chat text only where a byte-level BPE splits it anyway (at the template's special
   tokens, and between the two newlines of the blank line before the item), so an uncut prompt's ids equal those
   of the whole rendered chat, as an OpenAI-compatible server encodes it.
5. A content-free context (a method's baseline) depends only on the task, reference and evidence names, so its
   prompts repeat exactly across trajectories and are scored once.

Truncation rule (documented in the README): when a trajectory's prompt does not fit the model's context, each
evidence block is cut to a fair share of the room left (short blocks keep all their tokens, long blocks share
the rest equally), keeping the head and the tail halves of its share around a marker that says how many tokens
were cut. An item that still cannot fit (the instructions, task, reference, item and a minimum of evidence are
longer than the context) gets an error verdict; the other items are unaffected.
"""

from __future__ import annotations

from typing import Any

from rubrics.judges.prompt.prompts import Piece

_SENTINELS = ("QQSYSTEMQQ", "QQUSERONEQQ", "QQASSISTANTQQ", "QQUSERTWOQQ")
# Below this many tokens per evidence block a cut prompt says too little to be worth judging.
MIN_EVIDENCE_TOKENS = 32
# An upper bound on the cut marker's length in any BPE vocabulary (it is about 20 tokens in SmolLM2's).
CUT_MARKER_TOKENS = 40


def encode_trusted(tokenizer: Any, text: str) -> list[int]:
    """Our own strings and template pieces: special-token strings in them are parsed on purpose."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def encode_untrusted(tokenizer: Any, text: str) -> list[int]:
    """Rubric and trajectory text: special-token strings stay plain text (split_special_tokens=True)."""
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def encode_piece(tokenizer: Any, piece: Piece) -> list[int]:
    return encode_trusted(tokenizer, piece.text) if piece.trusted else encode_untrusted(tokenizer, piece.text)


def chat_layout(tokenizer: Any) -> tuple[list[int], list[int], list[int], list[int]]:
    """The template's pieces as token ids: (system_open: before the instructions, BOS and the system header or the
    user header; system_to_user: after the instructions, up to the user text; user_to_assistant: end of the user
    turn and the assistant header, the generation prompt; assistant_to_user: end of an assistant turn and the next
    user header, for reasoned mode)."""
    if not getattr(tokenizer, "chat_template", None):
        return ([], encode_trusted(tokenizer, "\n\n"), encode_trusted(tokenizer, "\n\nAnswer: "),
                encode_trusted(tokenizer, "\n\n"))
    rendered = _render_with_system(tokenizer)
    if rendered is not None:
        head, system_to_user, _, assistant_to_user, user_to_assistant = rendered
    else:  # a template without a system role: the instructions open the first user turn
        head, _, assistant_to_user, user_to_assistant = _render_without_system(tokenizer)
        system_to_user = "\n\n"
    enc = lambda text: encode_trusted(tokenizer, text)  # noqa: E731
    return enc(head), enc(system_to_user), enc(user_to_assistant), enc(assistant_to_user)


def _render(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _split(text: str, sentinels: tuple[str, ...]) -> list[str] | None:
    parts = []
    for sentinel in sentinels:
        if text.count(sentinel) != 1:
            return None
        before, text = text.split(sentinel)
        parts.append(before)
    return [*parts, text]


def _render_with_system(tokenizer: Any) -> list[str] | None:
    system, user, assistant, user_two = _SENTINELS
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user},
                {"role": "assistant", "content": assistant}, {"role": "user", "content": user_two}]
    try:
        return _split(_render(tokenizer, messages), _SENTINELS)
    except Exception:  # noqa: BLE001 - templates raise arbitrary errors for roles they refuse
        return None


def _render_without_system(tokenizer: Any) -> list[str]:
    _, user, assistant, user_two = _SENTINELS
    messages = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant},
                {"role": "user", "content": user_two}]
    parts = _split(_render(tokenizer, messages), (user, assistant, user_two))
    if parts is None:
        raise ValueError("the tokenizer's chat template does not render user and assistant turns as given")
    return parts


def encode_text(tokenizer: Any, pieces: list[Piece]) -> list[int]:
    """The pieces' text as one string, with special-token parsing off: our own pieces hold no special-token
    strings, and the untrusted ones must stay text. One string, as a server tokenizes the chat."""
    return encode_untrusted(tokenizer, "".join(piece.text for piece in pieces))


def encode_context(tokenizer: Any, pieces: list[Piece], room: int | None) -> tuple[list[int], int] | None:
    """Encode the context pieces into at most room tokens by cutting evidence: (ids, evidence tokens cut, 0 when it
    fit); None when no cut makes it fit.

    Uncut, the context is one string (see encode_text); a cut context is encoded piece by piece, to cut each
    evidence block on token boundaries (no server reproduces a cut prompt from the chat text anyway)."""
    whole = encode_text(tokenizer, pieces)
    if room is None or len(whole) <= room:
        return whole, 0
    encoded = [encode_piece(tokenizer, piece) for piece in pieces]
    total = sum(map(len, encoded))
    cuttable = [i for i, piece in enumerate(pieces) if piece.cuttable]
    fixed = total - sum(len(encoded[i]) for i in cuttable)
    marker_room = min(len(_marker(tokenizer, 10**6)), CUT_MARKER_TOKENS) * len(cuttable)
    available = room - fixed - marker_room
    if not cuttable or available < MIN_EVIDENCE_TOKENS * len(cuttable):
        return None
    shares = fair_shares([len(encoded[i]) for i in cuttable], available)
    cut = 0
    for index, share in zip(cuttable, shares):
        ids = encoded[index]
        if len(ids) > share:
            head = (share + 1) // 2
            tail = share - head
            cut += len(ids) - share
            encoded[index] = ids[:head] + _marker(tokenizer, len(ids) - share) + (ids[-tail:] if tail else [])
    return [t for ids in encoded for t in ids], cut


def fair_shares(lengths: list[int], available: int) -> list[int]:
    """Water-filling: blocks shorter than an equal share keep everything, the others split what is left."""
    shares = [0] * len(lengths)
    remaining = available
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    for position, index in enumerate(order):
        equal = remaining // (len(order) - position)
        shares[index] = min(lengths[index], equal)
        remaining -= shares[index]
    return shares


def _marker(tokenizer: Any, cut: int) -> list[int]:
    return encode_trusted(tokenizer, f"\n[... {cut} tokens of evidence cut here to fit the judge's context ...]\n")
