"""The judge prompt layout, shared by every judge and every method: chat messages for an OpenAI-compatible
server, token-id segments for the embedded engine (prompt_ids.py).

A prompt is three segments, in this order, so that a prefix cache can share all it can:

1. instructions: the same for every request of a method (shared by all trajectories);
2. context: the task, the reference and the fenced evidence of one trajectory (shared by its items);
3. item: what the method asks about one rubric item, then the answer cue.

Each method (rubrics/judges/methods/) writes its own instructions and item segment; the context is the same for
all of them. Text comes in pieces flagged trusted (our own strings, the chat template) or untrusted (anything
from a rubric or a trajectory). Untrusted pieces are fenced and, on the token path, encoded with special-token
parsing off, so `<|im_end|>` inside a trajectory is text, never a turn boundary; and their special-token strings
of the common chat formats are neutralised (neutralise_special_tokens), since a server judge's server tokenizes
the text itself, perhaps with special-token parsing on. Nothing here imports torch or transformers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rubrics.judges.protocol import JudgeContext, PairContext

# The prompt layout's version when it was one for every method. Each method now declares its own
# (JudgeMethod.layout_version, rubrics/judges/methods/), which fitted files record (rubrics/judges/fitted/fitted_file.py),
# so that changing one method's prompts refuses only the files fitted for it; a change to the shared segments here
# changes every method's prompts, so every method bumps its own. Nothing in the package reads this constant any
# more; it stays for code that imports it (it is every built-in method's first per-method version).
PROMPT_LAYOUT_VERSION = "2026-11-30.1"

# What stands in for every evidence block in a content-free prompt (a method's baseline).
CONTENT_FREE_EVIDENCE = "N/A"


@dataclass(frozen=True)
class Piece:
    text: str
    trusted: bool = True
    cuttable: bool = False  # evidence content: the part truncation may shorten


def untrusted(text: str, *, cuttable: bool = False) -> Piece:
    """Text from a rubric or a trajectory, its special-token strings neutralised (neutralise_special_tokens) and its
    lone surrogates (half a UTF-16 pair, which no tokenizer and no UTF-8 request body can carry) replaced by U+FFFD:
    the OpenAI-compatible judge's messages and the embedded judge's token ids are built from the same pieces, so
    both judges send the same prompt."""
    return Piece(neutralise_special_tokens(LONE_SURROGATE.sub("\ufffd", text)), trusted=False, cuttable=cuttable)


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run in text, so the text cannot close it (CommonMark rule)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(4, longest + 1)


def fenced(label: str, text: str, *, cuttable: bool = True) -> list[Piece]:
    fence = fence_for(text)
    return [Piece(f"{label}\n{fence}\n"), untrusted(text, cuttable=cuttable), Piece(f"\n{fence}\n")]


def context_pieces(context: JudgeContext | PairContext, *, content_free: bool = False) -> list[Piece]:
    """Task, reference and evidence of one trajectory; identical for all its items (the shared prefix). Two
    attempts side by side (a PairContext): pair_context_pieces.

    It ends with ONE newline after a non-space character and every item segment starts with the next newline:
    a byte-level BPE tokenizes "x\n" + "\nRubric" exactly as "x\n\nRubric", so the context and the item can
    each be encoded as one string and still give the ids of the whole user message (what a server computes).
    """
    if isinstance(context, PairContext):
        return pair_context_pieces(context)
    pieces = task_pieces(context)
    pieces.append(Piece("Evidence from the agent's work:\n"))
    pieces += evidence_pieces(context, content_free=content_free)
    return pieces  # the blank line before the item opens the item segment (see a method's item pieces)


def task_pieces(context: JudgeContext | PairContext) -> list[Piece]:
    pieces = [Piece("Task:\n"), untrusted(context.task.strip()), Piece("\n\n")]
    if context.reference:
        pieces += [Piece("Reference facts (never shown to the agent):\n"), untrusted(context.reference.strip()),
                   Piece("\n\n")]
    return pieces


def evidence_pieces(context: JudgeContext, *, content_free: bool = False, label: str = "") -> list[Piece]:
    if not context.evidence:
        return [Piece("(no evidence selected)\n")]
    pieces = []
    for block in context.evidence:
        text = CONTENT_FREE_EVIDENCE if content_free else (block.text or "(empty)")
        pieces += fenced(f"[{label}{block.name}]", text, cuttable=not content_free)
    return pieces


def pair_context_pieces(pair: PairContext) -> list[Piece]:
    """Task and reference once, then attempt A's evidence, then attempt B's: pairs that show the same attempt first
    share everything up to B, and the items of one pair share everything up to the item."""
    return [*task_pieces(pair), Piece("Evidence from attempt A:\n"), *evidence_pieces(pair.first, label="A: "),
            Piece("\nEvidence from attempt B:\n"), *evidence_pieces(pair.second, label="B: ")]


def join(pieces: list[Piece] | tuple[Piece, ...]) -> str:
    return "".join(piece.text for piece in pieces)


def chat_messages(context: JudgeContext | PairContext, instructions: str, item: tuple[Piece, ...] | list[Piece],
                  *, content_free: bool = False) -> list[dict[str, Any]]:
    """OpenAI-style messages for a server judge: the system turn holds the method's instructions. Every untrusted
    piece (task, reference, evidence, the rubric's item text and examples) has its special-token strings
    neutralised (neutralise_special_tokens): a server that parses special tokens in message content cannot be
    handed a forged turn."""
    pieces = [*context_pieces(context, content_free=content_free), *item]
    user = "".join(piece.text if piece.trusted else neutralise_special_tokens(piece.text) for piece in pieces)
    return [{"role": "system", "content": instructions}, {"role": "user", "content": user}]


# Special-token strings of the common chat formats: ChatML (<|im_start|>, <|im_end|>, <|endoftext|>), Llama 3
# (<|begin_of_text|>, <|start_header_id|>, <|eot_id|>, ...), Phi-3 (<|user|>, <|end|>, ...), OpenAI harmony
# (<|start|>, <|message|>, <|channel|>, ...) -- any <|name|> -- DeepSeek's full-width <｜User｜>-style tokens,
# Llama 2 and Mistral ([INST], [/INST], <<SYS>>, <</SYS>>, [TOOL_CALLS], [AVAILABLE_TOOLS], [TOOL_RESULTS],
# [SYSTEM_PROMPT], ...), Gemma (<start_of_turn>, <end_of_turn>) and the sentencepiece specials (<s>, </s>,
# <bos>, <eos>, <pad>, <unk>).
SPECIAL_TOKEN_PATTERN = re.compile(
    r"<\|[^|<>\s]{1,64}\|>"
    r"|<｜[^｜<>\n]{1,64}｜>"
    r"|\[/?(?:INST|SYS|TOOL_CALLS|AVAILABLE_TOOLS|TOOL_RESULTS|TOOL_CONTENT|SYSTEM_PROMPT|THINK)\]"
    r"|<</?SYS>>"
    r"|</?(?:s|bos|eos|pad|unk|start_of_turn|end_of_turn|start_of_image|end_of_image)>")
NEUTRALISER = "\u200b"   # ZERO WIDTH SPACE, after the first character: the text reads the same, tokenizes as text


def neutralise_special_tokens(text: str) -> str:
    """`text` with every special-token string of the common chat formats (SPECIAL_TOKEN_PATTERN) broken by a
    zero-width space after its first character, so no tokenizer reads it as its special token: what the
    OpenAI-compatible judge does to untrusted text (the embedded judge needs no such thing: it encodes untrusted
    text with special-token parsing off)."""
    return SPECIAL_TOKEN_PATTERN.sub(lambda match: match.group()[0] + NEUTRALISER + match.group()[1:], text)
