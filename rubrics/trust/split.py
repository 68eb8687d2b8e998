"""The fixed split of labelled domains into training and held-out ones (examples/labels/split.yaml).

    version: 1
    train: [domain, ...]       # what calibrations, verdict heads and thresholds may be fitted on
    held_out: [domain, ...]    # where the headline figures are measured; never fitted or tuned on

A domain is the folder name of its labels file (a label's `domain`). Written before anything is fitted.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class SplitError(ValueError):
    """A split file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True)
class LabelSplit:
    train: tuple[str, ...]
    held_out: tuple[str, ...]

    def part_of(self, domain: str) -> str | None:
        return "train" if domain in self.train else "held_out" if domain in self.held_out else None


def load_split(path: str | Path) -> LabelSplit:
    import yaml

    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SplitError(f"{where}: cannot read the split file: {exc}") from None
    if not isinstance(data, dict) or set(data) != {"version", "train", "held_out"}:
        raise SplitError(f"{where}: expected the fields version, train and held_out, found "
                         f"{sorted(data) if isinstance(data, dict) else type(data).__name__}")
    if data["version"] != 1:
        raise SplitError(f"{where}: version: expected 1, found {data['version']!r}")
    parts = {}
    for name in ("train", "held_out"):
        domains = data[name]
        if not isinstance(domains, list) or not domains or not all(isinstance(d, str) and d for d in domains):
            raise SplitError(f"{where}: {name}: expected a non-empty list of domain names, found {domains!r}")
        if len(set(domains)) != len(domains):
            raise SplitError(f"{where}: {name}: a domain is listed twice")
        parts[name] = tuple(domains)
    both = sorted(set(parts["train"]) & set(parts["held_out"]))
    if both:
        raise SplitError(f"{where}: held_out: {both[0]!r} is in train too")
    return LabelSplit(parts["train"], parts["held_out"])
