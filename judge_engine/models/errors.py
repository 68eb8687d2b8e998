"""The error every model-loading failure shares, so that callers catch one type whatever family failed."""

from __future__ import annotations


class ModelConfigError(ValueError):
    """config.json (or a .gguf's metadata) describes a model this engine cannot run, or is malformed."""
