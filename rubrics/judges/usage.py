"""What judging cost: tokens through the model, tokens a prefix cache served, verdicts the verdict cache served.

A verdict carries the usage of the model calls made for it; a Result sums its judge items' usage, and
`rubric grade` prints the totals (and a cost line with --price-per-mtok).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class JudgeUsage(BaseModel):
    model_config = ConfigDict(frozen=True)
    prompt_tokens: int = Field(0, ge=0, description="Prompt tokens sent to the judge model (every prompt and "
                                                    "sequence a verdict needed).")
    cached_tokens: int = Field(0, ge=0, description="Of those, tokens a prefix cache served (the engine's, or "
                                                    "the server's when it reports them) instead of computing.")
    completion_tokens: int = Field(0, ge=0, description="Tokens generated (answers, rationales).")
    cached_verdicts: int = Field(0, ge=0, description="Verdicts read from the verdict cache: no model work.")

    @property
    def computed_tokens(self) -> int:
        """Prompt tokens that went through the model."""
        return self.prompt_tokens - self.cached_tokens

    def __add__(self, other: JudgeUsage) -> JudgeUsage:
        return JudgeUsage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                          cached_tokens=self.cached_tokens + other.cached_tokens,
                          completion_tokens=self.completion_tokens + other.completion_tokens,
                          cached_verdicts=self.cached_verdicts + other.cached_verdicts)

    @classmethod
    def from_engine(cls, usage: Any) -> JudgeUsage:
        """From judge_engine's TokenUsage (a RequestOutput's or a Scored prompt's)."""
        return cls(prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_tokens,
                   completion_tokens=usage.output_tokens)

    @classmethod
    def from_openai(cls, body: Any) -> JudgeUsage:
        """From an OpenAI-style response's `usage` (prompt_tokens, completion_tokens, and
        prompt_tokens_details.cached_tokens when the server reports it); zeros where a server sends nothing
        usable, since a missing count is not a reason to fail a verdict."""
        usage = body.get("usage") if isinstance(body, dict) else None
        if not isinstance(usage, dict):
            return cls()
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        prompt = _count(usage.get("prompt_tokens"))
        return cls(prompt_tokens=prompt, cached_tokens=min(_count(cached), prompt),
                   completion_tokens=_count(usage.get("completion_tokens")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def total_usage(usages: Any) -> JudgeUsage:
    return sum((u for u in usages if u is not None), JudgeUsage())


def cost(usage: JudgeUsage, price_in: float, price_out: float) -> float:
    """Price of the prompt and generated tokens at prices per million tokens. Cached prompt tokens count at the
    full input price: discounts differ by provider, so for one that gives them the figure is an upper bound."""
    return (usage.prompt_tokens * price_in + usage.completion_tokens * price_out) / 1e6
