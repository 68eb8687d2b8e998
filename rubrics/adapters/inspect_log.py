"""Inspect AI eval logs: a `.json` log (`{"eval": {...}, "samples": [...]}`) or a `.eval` file (a zip holding
`header.json` and one `samples/ID_epoch_N.json` per sample). Each sample is a trajectory.

A sample's `messages` map to ours (Inspect's tool calls name their tool `function` and carry `arguments` as an
object; a `tool` message's `function` and `error` are kept); its id is `SAMPLE_ID` (with `:epochN` past the
first epoch) and its task_id the sample id; the final answer is `output.completion`; `metadata.inspect` keeps
the task, model, target, the sample's scores and its own metadata. `.eval` files are read with the inspect_ai
package when it is installed (`read_eval_log`), else as the zip they are, each member size-checked first.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any, Iterator

from rubrics.adapters.base import AdapterError, text_of

MAX_MEMBER_BYTES = 256 << 20    # one sample, decompressed: a zip bomb stops here, not in memory
MAX_LOG_BYTES = 2 << 30         # the whole .eval, decompressed


def _message(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        raise AdapterError(f"field {where}: expected a chat message with a role")
    content = raw.get("content")
    message: dict[str, Any] = {"role": raw["role"], "content": text_of(
        [b for b in content if not (isinstance(b, dict) and b.get("type") == "reasoning")]
        if isinstance(content, list) else content)}
    if isinstance(content, list):
        reasoning = [b.get("reasoning") for b in content if isinstance(b, dict) and b.get("type") == "reasoning"]
        if any(isinstance(r, str) and r for r in reasoning):
            message["reasoning"] = "\n".join(r for r in reasoning if isinstance(r, str) and r)
    calls = raw.get("tool_calls") or []
    if calls:
        message["tool_calls"] = [{"id": c.get("id"), "name": c.get("function"), "arguments": c.get("arguments")}
                                 for c in calls if isinstance(c, dict)]
    for key in ("tool_call_id", "function", "error"):
        if raw.get(key) is not None:
            message[key] = raw[key]
    return message


def sample_trajectory(sample: Any, header: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(sample, dict) or "id" not in sample:
        raise AdapterError(f"field {where}: expected a sample object with an id")
    messages = sample.get("messages")
    if not isinstance(messages, list):
        raise AdapterError(f"field {where}.messages: expected a list, got {type(messages).__name__}")
    epoch = sample.get("epoch") or 1
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    completion = output.get("completion")
    scores = {name: score.get("value") if isinstance(score, dict) else score
              for name, score in (sample.get("scores") or {}).items()}
    trajectory = {
        "id": f"{sample['id']}" + (f":epoch{epoch}" if epoch != 1 else ""),
        "task_id": str(sample["id"]),
        "messages": [_message(m, f"{where}.messages[{i}]") for i, m in enumerate(messages)],
        "metadata": {"inspect": {"task": header.get("task"), "model": header.get("model"),
                                 "target": sample.get("target"), "scores": scores,
                                 "metadata": sample.get("metadata") or {}}},
    }
    if isinstance(completion, str) and completion:
        trajectory["final_answer"] = completion
    return trajectory


class InspectLog:
    name = "inspect-log"
    suffixes = (".eval",)

    def detects(self, data: Any) -> bool:
        return (isinstance(data, dict) and isinstance(data.get("eval"), dict) and "version" in data
                and isinstance(data.get("samples", []), list))

    def convert(self, data: Any) -> list[dict[str, Any]]:
        header = self.header(data.get("eval"))
        return [sample_trajectory(s, header, f"samples[{i}]") for i, s in enumerate(data.get("samples") or [])]

    @staticmethod
    def header(eval_spec: Any) -> dict[str, Any]:
        spec = eval_spec if isinstance(eval_spec, dict) else {}
        return {"task": spec.get("task"), "model": spec.get("model")}

    def read_file(self, path: Path) -> Iterator[tuple[str, dict[str, Any] | AdapterError]]:
        """(where, trajectory or the error of that sample) for every sample of a .eval file."""
        try:
            with zipfile.ZipFile(path) as archive:
                infos = archive.infolist()
                too_big = [i.filename for i in infos if i.file_size > MAX_MEMBER_BYTES]
                if too_big or sum(i.file_size for i in infos) > MAX_LOG_BYTES:
                    raise AdapterError(f"{too_big[0] if too_big else 'the log'} is larger than the limit "
                                       f"({MAX_MEMBER_BYTES >> 20} MiB a sample, {MAX_LOG_BYTES >> 30} GiB in all)")
                names = sorted(i.filename for i in infos if i.filename.startswith("samples/")
                               and i.filename.endswith(".json"))
                if _inspect_installed():
                    yield from self._read_with_inspect(path)
                    return
                header = self.header(json.loads(archive.read("header.json")).get("eval")) \
                    if "header.json" in archive.namelist() else {}
                for name in names:
                    try:
                        sample = json.loads(archive.read(name))
                        yield name, sample_trajectory(sample, header, name)
                    except (AdapterError, ValueError) as exc:
                        yield name, AdapterError(str(exc))
        except (zipfile.BadZipFile, OSError, KeyError, ValueError) as exc:
            raise AdapterError(f"not a readable Inspect .eval log: {exc}") from None

    def _read_with_inspect(self, path: Path) -> Iterator[tuple[str, dict[str, Any] | AdapterError]]:
        from inspect_ai.log import read_eval_log

        log = read_eval_log(str(path))
        header = {"task": log.eval.task, "model": log.eval.model}
        for sample in log.samples or []:
            where = f"samples/{sample.id}_epoch_{sample.epoch}.json"
            try:
                yield where, sample_trajectory(sample.model_dump(mode="json"), header, where)
            except AdapterError as exc:
                yield where, exc


def _inspect_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("inspect_ai") is not None
    except (ImportError, ValueError):
        return False


INSPECT_LOG = InspectLog()
