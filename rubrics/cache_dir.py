"""Where agent-rubrics keeps the embedded judge model: $RUBRICS_CACHE, else ~/.cache/agent-rubrics.

The engine has a cache of its own (judge_engine/loading/cache.py) and knows nothing of this one: the rubric side passes
this directory in wherever it builds an engine or fetches the model (the cache_dir option), so that
RUBRICS_CACHE keeps deciding where the judge's weights live.
"""
from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "RUBRICS_CACHE"


def rubrics_cache_dir() -> Path:
    """``$RUBRICS_CACHE`` or ``~/.cache/agent-rubrics``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "agent-rubrics"
