"""A package's public names, each imported from its module on first use, so that importing the package stays cheap
(judge_engine: no torch until an engine is built; judge_engine.server: no starlette or uvicorn until a server is)."""
from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module-level __getattr__ for `package` that imports each name of `exports` (name -> module) when asked."""
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)
    return __getattr__
