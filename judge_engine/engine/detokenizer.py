"""Incremental detokenization: each new token costs one decode of a short window, not of the whole output.

Decoding a token alone loses context (a SentencePiece leading space, half of a multi-byte character), so the
delta is the difference between decoding a short window before and after the new tokens; a window that ends
inside a character (U+FFFD) waits for the next token.
"""

from __future__ import annotations

from dataclasses import dataclass

_CONTEXT_TOKENS = 5


@dataclass
class IncrementalDetokenizer:
    tokenizer: object
    token_ids: list[int]  # the sequence's list (prompt + output), shared, grows in place
    prefix_offset: int
    read_offset: int
    text: str = ""

    @classmethod
    def for_prompt(cls, tokenizer, token_ids: list[int]) -> "IncrementalDetokenizer":
        read = len(token_ids)
        return cls(tokenizer, token_ids, max(read - _CONTEXT_TOKENS, 0), read)

    def step(self) -> str:
        """Text added by tokens appended since the previous call ("" while a character is incomplete)."""
        if self.read_offset >= len(self.token_ids):
            return ""
        prefix, full = self._decode_window()
        if len(full) <= len(prefix) or full.endswith("\ufffd"):
            return ""
        delta = full[len(prefix):]
        self.prefix_offset = self.read_offset
        self.read_offset = len(self.token_ids)
        self.text += delta
        return delta

    def flush(self) -> str:
        """At the end, whatever a trailing incomplete character decodes to."""
        if self.read_offset >= len(self.token_ids):
            return ""
        prefix, full = self._decode_window()
        delta = full[len(prefix):] if full.startswith(prefix) else full
        self.read_offset = len(self.token_ids)
        self.text += delta
        return delta

    def _decode_window(self) -> tuple[str, str]:
        """The text of the window's tokens already read, and of the whole window (read and new)."""
        decode = self.tokenizer.decode
        return (decode(self.token_ids[self.prefix_offset:self.read_offset], skip_special_tokens=True),
                decode(self.token_ids[self.prefix_offset:], skip_special_tokens=True))
