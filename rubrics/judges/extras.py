"""Turn a missing optional dependency into a message that says how to install it."""
from __future__ import annotations

ENGINE_MODULES = frozenset({"torch", "transformers", "tokenizers", "safetensors", "gguf", "accelerate",
                            "numpy", "judge_engine", "triton"})
ENGINE_INSTALL = "pip install 'agent-rubrics[engine]'"
HTTP_MODULES = frozenset({"httpx"})
HTTP_INSTALL = "pip install 'agent-rubrics[openai]'"


class MissingExtraError(ImportError):
    """An optional extra that a judge needs is not installed."""


def explain_missing(exc: BaseException) -> MissingExtraError | None:
    """A MissingExtraError for an import error of an optional dependency, else None."""
    if isinstance(exc, MissingExtraError):
        return exc
    if not isinstance(exc, ImportError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    if top in ENGINE_MODULES:
        return MissingExtraError(f"the embedded judge needs the [engine] extra ('{top}' is not installed); "
                                 f"install it with: {ENGINE_INSTALL}", name=exc.name)
    if top in HTTP_MODULES:
        return MissingExtraError(f"the OpenAI-compatible judge needs httpx ('{top}' is not installed); "
                                 f"install it with: {HTTP_INSTALL}", name=exc.name)
    return None


def import_judge_class(module: str, name: str):
    """rubrics.judges.<module>.<name>, with missing extras explained."""
    import importlib

    try:
        return getattr(importlib.import_module(f"rubrics.judges.{module}"), name)
    except ImportError as exc:
        explained = explain_missing(exc)
        if explained is not None:
            raise explained from exc
        raise


ENGINE_PREFLIGHT = ("torch", "transformers")


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):   # e.g. sys.modules[name] is None
        return False


def require_engine() -> None:
    """Fail before any work when the engine extra is missing (the embedded judge may import it lazily,
    deep inside its first call, where the reason would be harder to read)."""
    for name in ENGINE_PREFLIGHT:
        if not _importable(name):
            raise MissingExtraError(f"the embedded judge needs the [engine] extra ('{name}' is not installed); "
                                    f"install it with: {ENGINE_INSTALL}", name=name)

