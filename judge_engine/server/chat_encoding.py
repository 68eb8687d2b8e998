"""Chat messages to prompt token ids, with message contents kept out of special-token parsing.

A plain `apply_chat_template(...)` followed by tokenization would parse `<|im_end|>` written inside a user's
message as a real turn boundary, so a client could forge turns. Instead the template is rendered with one
sentinel per message, split around the sentinels, and the template's own pieces are encoded with special
tokens parsed while each content is encoded with them off. Pieces are encoded apart and concatenated, the same
rule the embedded judge follows, so a judge prompt sent as chat gets the same token ids here as in-process.
"""

from __future__ import annotations

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


def encode_chat(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of the rendered conversation plus the assistant generation prompt."""
    if not getattr(tokenizer, "chat_template", None):
        raise ChatTemplateError("this model has no chat template; use /v1/completions with a prompt instead")
    tag = uuid.uuid4().hex[:8]
    sentinels = [f"QQ{tag}M{i}QQ" for i in range(len(messages))]
    stand_ins = [{**message, "content": sentinel} for message, sentinel in zip(messages, sentinels)]
    try:
        rendered = tokenizer.apply_chat_template(stand_ins, tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - templates raise jinja errors for roles or orders they refuse
        raise ChatTemplateError(f"the chat template refused these messages: {exc}") from exc
    ids: list[int] = []
    for message, sentinel in zip(messages, sentinels):
        if rendered.count(sentinel) != 1:
            raise ChatTemplateError(f"the chat template does not render a {message['role']!r} message's content")
        before, rendered = rendered.split(sentinel)
        ids += encode_template_text(tokenizer, before)
        ids += encode_content(tokenizer, message["content"])
    return ids + encode_template_text(tokenizer, rendered)
