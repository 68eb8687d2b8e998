"""Inspect AI eval logs: a `.json` log (`{"eval": {...}, "samples": [...]}`) or a `.eval` file (a zip holding
`header.json` and one `samples/ID_epoch_N.json` per sample). Each sample is a trajectory.

A sample's `messages` map to ours (Inspect's tool calls name their tool `function` and carry `arguments` as an
object; a `tool` message's `function` and `error` are kept); its id is `SAMPLE_ID` (with `:epochN` past the
first epoch) and its task_id the sample id; the final answer is `output.completion`; `metadata.inspect` keeps
the task, model, target, the sample's scores and its own metadata. `.eval` files are read with the inspect_ai
package when it is installed (`read_eval_log`), else as the zip they are. Either way every member is first read
here in bounded chunks, never past its declared size or MAX_MEMBER_BYTES (a member that lies about its size stops
there), and decoded by the hardened JSON loader (nesting past its limit is a positioned error, not a
RecursionError); a log with such a member is not handed to inspect_ai but read by our own reader, where the bad
member is an error of its own and the other samples still load.
"""
from __future__ import annotations

import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rubrics.trajectory.adapters.base import AdapterError, text_of

MAX_MEMBER_BYTES = 256 << 20    # one sample, decompressed: a zip bomb stops here, not in memory
MAX_LOG_BYTES = 2 << 30         # the whole .eval, decompressed
# Inflated bytes per byte of archive: JSON logs compress 5-20x; an honest bomb (65 KB declaring 1.75 GB) far more.
# A log whose members declare more than this many times its own size (past FREE_INFLATION) is refused unread.
MAX_INFLATION_RATIO = 100
FREE_INFLATION = 64 << 20
MAX_MEMBERS = 100_000           # entries in the zip's directory
READ_CHUNK = 1 << 20            # members are inflated this much at a time, never in one piece


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
    if not isinstance(calls, list):
        raise AdapterError(f"field {where}.tool_calls: expected a list, got {type(calls).__name__}")
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
    raw_scores = sample.get("scores") or {}
    if not isinstance(raw_scores, dict):
        raise AdapterError(f"field {where}.scores: expected an object, got {type(raw_scores).__name__}")
    scores = {name: score.get("value") if isinstance(score, dict) else score for name, score in raw_scores.items()}
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
                if len(infos) > MAX_MEMBERS:
                    raise AdapterError(f"it has {len(infos)} members, more than the limit of {MAX_MEMBERS}")
                too_big = [i.filename for i in infos if i.file_size > MAX_MEMBER_BYTES]
                declared = sum(i.file_size for i in infos)
                if too_big or declared > MAX_LOG_BYTES:
                    raise AdapterError(f"{too_big[0] if too_big else 'the log'} is larger than the limit "
                                       f"({MAX_MEMBER_BYTES >> 20} MiB a sample, {MAX_LOG_BYTES >> 30} GiB in all)")
                check_inflation(declared, path.stat().st_size)
                samples = sorted((i for i in infos if i.filename.startswith("samples/")
                                  and i.filename.endswith(".json")), key=lambda i: i.filename)
                by_name = {i.filename: i for i in infos}
                if _inspect_installed() and self._safe_for_inspect(archive, [by_name.get("header.json"), *samples]):
                    yield from self._read_with_inspect(path)
                    return
                header: dict[str, Any] = {}
                if "header.json" in by_name:
                    decoded = read_json_member(archive, by_name["header.json"])
                    header = self.header(decoded.get("eval") if isinstance(decoded, dict) else None)
                for info in samples:
                    try:
                        yield info.filename, sample_trajectory(read_json_member(archive, info), header, info.filename)
                    except AdapterError as exc:
                        yield info.filename, exc
                    except Exception as exc:  # noqa: BLE001 - one odd sample costs only itself
                        yield info.filename, AdapterError(f"{type(exc).__name__}: {exc}")
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, KeyError, ValueError, RuntimeError,
                NotImplementedError, EOFError) as exc:
            raise AdapterError(f"not a readable Inspect .eval log: {exc}") from None

    @staticmethod
    def _safe_for_inspect(archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo | None]) -> bool:
        """Whether inspect_ai may read the log: every member it will read holds its declared size or less (read
        here in bounded chunks: inspect_ai's reader would inflate a lying member in one piece) and decodes within
        the nesting limit. A log that fails is read by our own reader, where a bad sample costs only itself."""
        for info in infos:
            if info is None:
                continue
            try:
                read_json_member(archive, info)
            except (AdapterError, zipfile.BadZipFile, OSError, ValueError, RuntimeError, NotImplementedError,
                    EOFError):
                return False
        return True

    def _read_with_inspect(self, path: Path) -> Iterator[tuple[str, dict[str, Any] | AdapterError]]:
        """The samples one at a time (read_eval_log_samples), so a log's samples never sit in memory together."""
        from inspect_ai.log import read_eval_log, read_eval_log_samples

        with _inspect_errors():
            log = read_eval_log(str(path), header_only=True)
            header = {"task": log.eval.task, "model": log.eval.model}
            samples = read_eval_log_samples(str(path), all_samples_required=False)
        for sample in _each(samples):
            where = f"samples/{sample.id}_epoch_{sample.epoch}.json"
            try:
                yield where, sample_trajectory(sample.model_dump(mode="json"), header, where)
            except AdapterError as exc:
                yield where, exc
            except Exception as exc:  # noqa: BLE001 - one odd sample costs only itself
                yield where, AdapterError(f"{type(exc).__name__}: {exc}")


@contextmanager
def _inspect_errors() -> Iterator[None]:
    """inspect_ai's own errors as an AdapterError, reported against this file only."""
    try:
        yield
    except RecursionError:
        raise AdapterError("inspect_ai could not read it: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - whatever inspect_ai raises
        raise AdapterError(f"inspect_ai could not read it: {type(exc).__name__}: {exc}") from None


def _each(samples: Iterator[Any]) -> Iterator[Any]:
    """inspect_ai's sample generator, its errors reported against this file (after the samples already read)."""
    with _inspect_errors():
        yield from samples


def check_inflation(declared: int, archive_size: int) -> None:
    """AdapterError for an archive whose members declare more than MAX_INFLATION_RATIO times its size (past the
    first FREE_INFLATION bytes): a compression bomb, refused before anything is inflated."""
    allowed = max(FREE_INFLATION, MAX_INFLATION_RATIO * archive_size)
    if declared > allowed:
        raise AdapterError(f"its members inflate to {declared} bytes, {declared / max(archive_size, 1):.0f} times "
                           f"the {archive_size} bytes of the file (the limit is {MAX_INFLATION_RATIO} times, past "
                           f"{FREE_INFLATION >> 20} MiB): a compression bomb, not read")


ZSTD = 93   # the zip compression method number of Zstandard


def _readable_compression(method: int) -> bool:
    """Stored and deflated members; zstd (what recent inspect_ai writes) where zipfile can inflate it: with the
    zipfile-zstd package that inspect_ai depends on, imported here when it is installed. Both inflate in pieces
    of at most a few compressed KiB at a time, so read_member's bound holds."""
    if method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return True
    if method != ZSTD:
        return False
    try:
        import zipfile_zstd  # noqa: F401 - teaches zipfile the zstd method
    except ImportError:
        return False
    try:
        zipfile._check_compression(ZSTD)   # type: ignore[attr-defined]
    except (NotImplementedError, RuntimeError):
        return False
    return True


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int | None = None) -> bytes:
    """A member's bytes, inflated in READ_CHUNK pieces and never past min(its declared size, limit): a member
    whose compressed data inflates to more than it declares stops there (zipfile then reports its bad CRC)
    instead of being inflated whole. Only stored and deflated members are read (bzip2 and lzma inflate a whole
    compressed chunk at once, unbounded)."""
    limit = MAX_MEMBER_BYTES if limit is None else limit
    if not _readable_compression(info.compress_type):
        raise AdapterError(f"{info.filename}: compression method {info.compress_type} is not read (only stored "
                           "and deflated members, as Inspect writes them)")
    if info.file_size > limit:
        raise AdapterError(f"{info.filename}: {info.file_size} bytes, larger than the limit of {limit} bytes")
    allowed = min(info.file_size, limit)
    parts: list[bytes] = []
    total = 0
    with archive.open(info) as member:
        while True:
            piece = member.read(READ_CHUNK)
            if not piece:
                break
            total += len(piece)
            if total > allowed:
                raise AdapterError(f"{info.filename}: inflates past its declared size of {info.file_size} bytes")
            parts.append(piece)
    return b"".join(parts)


def read_json_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    """A member read with read_member and decoded by the hardened JSON loader (rubrics.trajectory.json_text: nesting past
    its limit, bad UTF-8 and bad syntax become an AdapterError with the line and column, never a RecursionError)."""
    from rubrics.trajectory.json_text import JSONTextError, decode_utf8, loads

    data = read_member(archive, info).removeprefix(b"\xef\xbb\xbf")
    try:
        return loads(decode_utf8(data))
    except JSONTextError as exc:
        raise AdapterError(f"{info.filename}: line {exc.line}: {exc}") from None


def _inspect_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("inspect_ai") is not None
    except (ImportError, ValueError):
        return False


INSPECT_LOG = InspectLog()
