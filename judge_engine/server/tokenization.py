"""Prompt tokenization off the event loop, with a cheap length bound checked before any tokenizing.

Tokenizing a long text takes seconds; on the asyncio loop it would stall every other client (and /health) for
that long. Each request is tokenized in a small thread pool instead (the Rust tokenizer releases the GIL). A fast
tokenizer refuses concurrent use of one object from two threads ("Already borrowed"), so every worker borrows a
copy of its own from a pool holding one copy per worker.

The length bound: no token of the vocabulary spells more than `longest_token_chars` characters, so a text of
more than max_model_len * longest_token_chars characters cannot fit the context whatever it tokenizes to; it is
refused before the tokenizer sees it. The bound is doubled so that a tokenizer whose normalizer drops characters
never has a prompt that would fit refused. That bound is loose (a vocabulary's longest entry may be a run of 80
spaces, so 1.3M characters pass it for 8,192 tokens, seconds of a worker's time), so a text longer than
PROBE_CHARS_PER_TOKEN characters a token of context is first probed: its first that many characters are tokenized
alone, and when they already hold more tokens than the context, the request is refused without the rest being
tokenized. A hostile request then costs a worker the tokenizing of about max_model_len * PROBE_CHARS_PER_TOKEN
characters (milliseconds), never of megabytes. A chat request is also refused when it holds more messages than the
context has tokens (every message renders to at least one token), and its encoding is linear in the messages
(chat_encoding.encode_chat_segments), so a flood of empty messages costs one pass, not one pass per message.

The pool is shared fairly: requests wait in one queue per client address, and a free worker takes the next request
of the next client in turn, so a client that sends many long prompts delays its own requests, not another client's
one-token request.
"""

from __future__ import annotations

import asyncio
import copy
import queue
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from judge_engine.server import chat_encoding
from judge_engine.server.errors import OpenAIError

T = TypeVar("T")
BOUND_MARGIN = 2
PROBE_CHARS_PER_TOKEN = 8   # real text runs 3-5 characters a token: a probe this long of a prompt that fits is rare
PROBE_SLACK = 8             # tokens a cut through a word or a special token may add or remove at the probe's end
FALLBACK_TOKEN_CHARS = 64   # a tokenizer that cannot list its vocabulary: longer than most tokens of real ones


def longest_token_chars(tokenizer: Any) -> int:
    """Characters of the longest vocabulary entry (byte-level and sentencepiece entries spell one character per
    byte or character of text, so no token decodes to more)."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - any tokenizer without a listable vocabulary gets the fallback
        return FALLBACK_TOKEN_CHARS
    return max((len(token) for token in vocab), default=FALLBACK_TOKEN_CHARS)


class PromptEncoder:
    """Turns a completion prompt or chat messages into token ids in worker threads, refusing what cannot fit."""

    def __init__(self, tokenizer: Any, max_model_len: int, workers: int = 2):
        self.max_model_len = max_model_len
        self.max_prompt_chars = max_model_len * longest_token_chars(tokenizer) * BOUND_MARGIN
        self._tokenizers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(workers):
            self._tokenizers.put(copy.deepcopy(tokenizer))
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tokenize")
        self._workers = workers
        self._busy = 0
        # client -> its waiting jobs; the first client is the next served, then moved to the end (round robin)
        self._waiting: OrderedDict[str, deque[tuple[Callable, Any, asyncio.Future]]] = OrderedDict()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def encode_prompt(self, prompt: str | list[int], client: str = "") -> list[int]:
        """Mirrors LLMEngine.encode: special tokens parsed, the tokenizer's BOS added unless already there."""
        if not isinstance(prompt, str):
            return list(prompt)
        self._check_chars(len(prompt), "prompt")
        if len(prompt) > self.probe_chars:
            await self._probe(prompt, "prompt", slack=PROBE_SLACK, client=client)
        return await self._run(encode_text, prompt, client)

    async def encode_chat(self, messages: list[dict[str, str]], client: str = "") -> list[int]:
        if len(messages) > self.max_model_len:   # every message renders to at least one token of the template
            raise OpenAIError(400, f"this model's maximum context length is {self.max_model_len} tokens, and the "
                              f"request holds {len(messages)} messages, each at least one token; send fewer "
                              "messages", param="messages", code="context_length_exceeded")
        chars = sum(len(m["content"]) for m in messages)
        self._check_chars(chars, "messages")
        if chars > self.probe_chars:   # the contents alone, joined: the template only adds tokens
            joined = "\n".join(m["content"] for m in messages)
            await self._probe(joined, "messages", slack=PROBE_SLACK + len(messages), client=client)
        try:
            return await self._run(chat_encoding.encode_chat, messages, client)
        except chat_encoding.ChatTemplateError as exc:
            raise OpenAIError(400, str(exc), param="messages") from exc

    @property
    def probe_chars(self) -> int:
        return self.max_model_len * PROBE_CHARS_PER_TOKEN

    async def _probe(self, text: str, param: str, slack: int, client: str) -> None:
        """400 when the text's first probe_chars characters already hold more tokens than the context."""
        head = text[:self.probe_chars]
        counted = len(await self._run(count_text, head, client))
        if counted > self.max_model_len + slack:
            raise OpenAIError(400, f"this model's maximum context length is {self.max_model_len} tokens, and the "
                              f"first {len(head)} of the {len(text)} characters of the {param} already hold "
                              f"{counted} tokens; shorten the {param}", param=param, code="context_length_exceeded")

    def _check_chars(self, chars: int, param: str) -> None:
        if chars > self.max_prompt_chars:
            raise OpenAIError(400, f"this model's maximum context length is {self.max_model_len} tokens, and the "
                              f"{param} holds {chars} characters, more than that many tokens can spell; shorten "
                              f"the {param}", param=param, code="context_length_exceeded")

    async def _run(self, encode: Callable[[Any, T], list[int]], value: T, client: str = "") -> list[int]:
        """encode(tokenizer, value) on a worker, when the client's turn comes."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(client, deque()).append((encode, value, future))
        self._dispatch()
        return await future

    def _dispatch(self) -> None:
        """Start waiting jobs on free workers, one per client in turn (on the event loop's thread)."""
        loop = asyncio.get_running_loop()
        while self._busy < self._workers and self._waiting:
            client, jobs = next(iter(self._waiting.items()))
            encode, value, future = jobs.popleft()
            if jobs:
                self._waiting.move_to_end(client)
            else:
                del self._waiting[client]
            if future.cancelled():   # its client went away while it waited
                continue
            self._busy += 1
            running = loop.run_in_executor(self._executor, self._with_tokenizer, encode, value)
            running.add_done_callback(lambda done, future=future: self._finished(done, future))

    def _finished(self, done: asyncio.Future, future: asyncio.Future) -> None:
        self._busy -= 1
        if done.cancelled():   # the pool shut down
            future.cancel()
        elif not future.cancelled():
            if done.exception() is not None:
                future.set_exception(done.exception())
            else:
                future.set_result(done.result())
        self._dispatch()

    def _with_tokenizer(self, encode: Callable[[Any, T], list[int]], value: T) -> list[int]:
        tokenizer = self._tokenizers.get()
        try:
            return encode(tokenizer, value)
        finally:
            self._tokenizers.put(tokenizer)


def encode_text(tokenizer: Any, prompt: str) -> list[int]:
    bos = getattr(tokenizer, "bos_token", None)
    add_special = not (bos and prompt.startswith(bos))
    return list(tokenizer(prompt, add_special_tokens=add_special)["input_ids"])


def count_text(tokenizer: Any, text: str) -> list[int]:
    """The text's token ids, special-token strings read as plain text (only their number matters here)."""
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])
