"""Hostile Inspect `.eval` zips for the tests: a member that lies about its size, and deeply nested members; and a
stand-in `inspect_ai` package whose `read_eval_log` reads a zip the naive way, importable in place of the real one
for the length of a `with` block."""
from __future__ import annotations

import importlib
import json
import struct
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HEADER = {"version": 2, "eval": {"task": "refund", "model": "mockllm/model"}}


def sample(sample_id: str, answer: str = "Refunded 84.50.") -> dict:
    return {"id": sample_id, "epoch": 1, "messages": [{"role": "user", "content": f"refund {sample_id}"},
                                                      {"role": "assistant", "content": answer}],
            "output": {"completion": answer}, "scores": {}}


def eval_log(path: Path, members: dict[str, bytes | str | dict]) -> Path:
    """A .eval zip with header.json and the given members (a dict is written as its JSON)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("header.json", json.dumps(HEADER))
        for name, content in members.items():
            archive.writestr(name, json.dumps(content) if isinstance(content, dict) else content)
    return path


def lie_about_size(path: Path, member: str, declared: int) -> None:
    """Rewrite `member`'s uncompressed size, in its local header and in the central directory, to `declared`."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    local = info.header_offset
    assert data[local:local + 4] == b"PK\x03\x04"
    struct.pack_into("<I", data, local + 22, declared)
    name = member.encode()
    central = data.find(b"PK\x01\x02")
    while central != -1:
        name_length = struct.unpack_from("<H", data, central + 28)[0]
        if bytes(data[central + 46:central + 46 + name_length]) == name:
            struct.pack_into("<I", data, central + 24, declared)
            break
        central = data.find(b"PK\x01\x02", central + 4)
    else:
        raise AssertionError(f"{member} not in the central directory")
    path.write_bytes(bytes(data))


def lying_log(path: Path, inflated: int, declared: int = 100) -> Path:
    """A .eval log of two good samples and one whose `inflated` bytes of deflated zeros declare `declared` bytes."""
    eval_log(path, {"samples/a_epoch_1.json": sample("a"), "samples/bomb_epoch_1.json": b"0" * inflated,
                    "samples/z_epoch_1.json": sample("z")})
    lie_about_size(path, "samples/bomb_epoch_1.json", declared)
    return path


def nested_log(path: Path, depth: int = 200_000) -> Path:
    """A .eval log of two good samples and one nested `depth` brackets deep."""
    return eval_log(path, {"samples/a_epoch_1.json": sample("a"), "samples/deep_epoch_1.json": "[" * depth,
                           "samples/z_epoch_1.json": sample("z")})


FAKE_INSPECT_LOG = '''
"""A stand-in for inspect_ai.log: reads the zip the naive way (whole members, plain json.loads), as a reader that
trusts the zip would; it notes each call in $FAKE_INSPECT_CALLS."""
import json, os, zipfile
from types import SimpleNamespace


class _Sample(SimpleNamespace):
    def model_dump(self, mode="json"):
        return dict(self.raw)


def _note(path):
    if os.environ.get("FAKE_INSPECT_CALLS"):
        with open(os.environ["FAKE_INSPECT_CALLS"], "a") as calls:
            calls.write(path + "\\n")


def read_eval_log(path, header_only=False):
    _note(path)
    with zipfile.ZipFile(path) as archive:
        header = json.loads(archive.read("header.json"))
        samples = [] if header_only else [json.loads(archive.read(n)) for n in sorted(archive.namelist())
                                          if n.startswith("samples/")]
    return SimpleNamespace(eval=SimpleNamespace(task=header["eval"]["task"], model=header["eval"]["model"]),
                           samples=[_Sample(id=s["id"], epoch=s.get("epoch", 1), raw=s) for s in samples])


def read_eval_log_samples(path, all_samples_required=True):
    _note(path)
    with zipfile.ZipFile(path) as archive:
        for name in sorted(archive.namelist()):
            if name.startswith("samples/"):
                s = json.loads(archive.read(name))
                yield _Sample(id=s["id"], epoch=s.get("epoch", 1), raw=s)
'''


def fake_inspect_ai(folder: Path) -> Path:
    """A folder holding the stand-in inspect_ai package; put it on PYTHONPATH (a subprocess) or use
    `stand_in_inspect_ai` (this process)."""
    package = folder / "inspect_ai"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "log.py").write_text(FAKE_INSPECT_LOG)
    return folder


def _inspect_modules() -> list[str]:
    return [name for name in sys.modules if name == "inspect_ai" or name.startswith("inspect_ai.")]


@contextmanager
def stand_in_inspect_ai(folder: Path) -> Iterator[Path]:
    """The stand-in is what `import inspect_ai` finds inside the block; afterwards the modules of a real inspect_ai
    that was imported before come back as they were. (Deleting them instead would make the next import build a
    second copy of its classes, which the first copy's pydantic models then refuse: "Input should be a valid
    dictionary or instance of Score".)"""
    saved = {name: sys.modules.pop(name) for name in _inspect_modules()}
    site = str(fake_inspect_ai(folder))
    sys.path.insert(0, site)
    importlib.invalidate_caches()
    try:
        yield folder
    finally:
        sys.path.remove(site)
        for name in _inspect_modules():
            del sys.modules[name]
        sys.modules.update(saved)
        importlib.invalidate_caches()
