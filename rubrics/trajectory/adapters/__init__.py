"""Trajectory adapters: logs of other agent frameworks, recognised by their shape and turned into our format.

Each adapter is one module with an Adapter instance; ADAPTERS lists them, one line each, in the order they are
tried (the first whose `detects` is true converts the data). Our own format and plain OpenAI chat messages need
no adapter: data that no adapter recognises loads as it is.
"""
from __future__ import annotations

from typing import Any

from rubrics.trajectory.adapters.anthropic_messages import ANTHROPIC_MESSAGES
from rubrics.trajectory.adapters.base import Adapter, AdapterError
from rubrics.trajectory.adapters.inspect_log import INSPECT_LOG
from rubrics.trajectory.adapters.openai_responses import OPENAI_RESPONSES
from rubrics.trajectory.adapters.swe_agent import SWE_AGENT

ADAPTERS: tuple[Adapter, ...] = (
    INSPECT_LOG,
    SWE_AGENT,
    OPENAI_RESPONSES,
    ANTHROPIC_MESSAGES,
)

__all__ = ["ADAPTERS", "Adapter", "AdapterError", "find_adapter"]


def find_adapter(data: Any) -> Adapter | None:
    """The adapter that recognises this decoded JSON value, or None (it is our format, or chat messages)."""
    return next((adapter for adapter in ADAPTERS if adapter.detects(data)), None)
