"""Engine log-probabilities (per token: {token_id: logprob}, chosen first) in OpenAI's two shapes."""

from __future__ import annotations

from typing import Any

from judge_engine.server.protocol import ChatLogprobs, CompletionLogprobs, TokenLogprob, TopLogprob


class TokenTexts:
    """Token id -> its text as OpenAI shows it (decoded alone, special tokens kept), cached per id."""

    def __init__(self, tokenizer: Any):
        self._tokenizer = tokenizer
        self._cache: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._cache.get(token_id)
        if text is None:
            text = self._tokenizer.decode([token_id], skip_special_tokens=False)
            self._cache[token_id] = text
        return text


def most_likely(entry: dict[int, float], n: int) -> list[tuple[int, float]]:
    # The engine adds the sampled token to its top-n; it belongs to the top list only if it ranks there.
    return sorted(entry.items(), key=lambda item: -item[1])[:n]


def chat_logprobs(texts: TokenTexts, token_ids: list[int], logprobs: list[dict[int, float]],
                  top_n: int) -> ChatLogprobs:
    content = []
    for token_id, entry in zip(token_ids, logprobs):
        text = texts(token_id)
        top = [TopLogprob(token=texts(t), logprob=lp, bytes=list(texts(t).encode())) for t, lp in
               most_likely(entry, top_n)]
        content.append(TokenLogprob(token=text, logprob=entry[token_id], bytes=list(text.encode()), top_logprobs=top))
    return ChatLogprobs(content=content)


def completion_logprobs(texts: TokenTexts, token_ids: list[int], logprobs: list[dict[int, float]], top_n: int,
                        text_offset: int = 0) -> CompletionLogprobs:
    result = CompletionLogprobs(top_logprobs=[])
    for token_id, entry in zip(token_ids, logprobs):
        text = texts(token_id)
        result.tokens.append(text)
        result.token_logprobs.append(entry[token_id])
        result.text_offset.append(text_offset)
        text_offset += len(text)
        top: dict[str, float] = {}
        for t, lp in most_likely(entry, top_n):
            top.setdefault(texts(t), lp)  # two ids can decode to one string; keep the likelier
        result.top_logprobs.append(top)
    return result
