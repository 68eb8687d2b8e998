"""Chat messages to prompt token ids: as the model's chat template renders them, without forged turns.

Ordinary messages are tokenized exactly as `apply_chat_template` + tokenization of the whole string (what vLLM
and SGLang do, and how chat models are trained). A message whose content holds a special-token string such as
`<|im_end|>` would then be parsed into a real turn boundary, letting a client forge turns; for those the
template is rendered with one sentinel per message and split around them, the template's own pieces are encoded
with special tokens parsed and each content with special-token parsing off (split_special_tokens=True).
"""

from __future__ import annotations

import re
import uuid
from typing import Any


class ChatTemplateError(ValueError):
    """The messages cannot be rendered by this model's chat template (e.g. a role it refuses)."""


def encode_template_text(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def encode_content(tokenizer: Any, text: str) -> list[int]:
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def _encode_many(tokenizer: Any, texts: list[str], **options: Any) -> list[list[int]]:
    """Each text's ids, in one batch call of the tokenizer (an empty text: no ids)."""
    wanted = [i for i, text in enumerate(texts) if text]
    ids: list[list[int]] = [[] for _ in texts]
    if wanted:
        encoded = tokenizer([texts[i] for i in wanted], add_special_tokens=False, **options)["input_ids"]
        for i, row in zip(wanted, encoded):
            ids[i] = list(row)
    return ids


def special_token_strings(tokenizer: Any) -> list[str]:
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    strings = {token.content for token in added.values() if getattr(token, "special", False)}
    strings.update(getattr(tokenizer, "all_special_tokens", []) or [])
    return [s for s in strings if s]


def render(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError("this model has no chat template; use /v1/completions with a prompt instead")
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - templates raise jinja errors for roles or orders they refuse
        raise ChatTemplateError(f"the chat template refused these messages: {exc}") from exc


def encode_chat(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the rendered conversation plus the assistant generation prompt."""
    specials = special_token_strings(tokenizer)
    if not any(special in message["content"] for message in messages for special in specials):
        return encode_template_text(tokenizer, render(tokenizer, messages))
    return encode_chat_segments(tokenizer, messages)


def encode_chat_segments(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """The template's pieces with special tokens parsed, every message content with them off.

    Linear in the rendered text and the number of messages: the sentinels are found in one regex pass (each must
    appear exactly once, in message order), the pieces are slices, and the template's pieces and the contents
    are each tokenized in one batch call."""
    tag = uuid.uuid4().hex[:8]
    sentinels = [f"QQ{tag}M{i}QQ" for i in range(len(messages))]
    rendered = render(tokenizer, [{**message, "content": s} for message, s in zip(messages, sentinels)])
    found = [(int(match.group(1)), match.start(), match.end())
             for match in re.finditer(f"QQ{tag}M([0-9]+)QQ", rendered)]
    for expected, (index, _, _) in enumerate(found):
        if index != expected:
            break
    else:
        expected = len(found)
    if expected < len(messages) or len(found) != len(messages):
        missing = messages[min(expected, len(messages) - 1)]
        raise ChatTemplateError(f"the chat template does not render a {missing['role']!r} message's content")
    pieces, start = [], 0
    for _, begin, end in found:
        pieces.append(rendered[start:begin])
        start = end
    pieces.append(rendered[start:])
    template_ids = _encode_many(tokenizer, pieces)
    content_ids = _encode_many(tokenizer, [message["content"] for message in messages], split_special_tokens=True)
    ids: list[int] = []
    for piece, content in zip(template_ids, content_ids):
        ids += piece
        ids += content
    return ids + template_ids[-1]
