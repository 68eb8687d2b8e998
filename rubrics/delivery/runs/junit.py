"""Test outcomes from the JUnit XML files a grader writes into REPORT_DIR (pytest --junitxml, and most runners).

The reports are written by the attempt's own processes too and read on the host, outside the sandbox's
wall-time limit, so reading them is bounded like any hostile input: at most FILE_LIMIT files of at most
REPORT_LIMIT bytes, TOTAL_LIMIT bytes in all, elements nested at most DEPTH_LIMIT deep, and PARSE_LIMIT_S
CPU seconds of parsing for all of them. What is over a limit is not read and says so in the problems.
"""
from __future__ import annotations

import os
import stat
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TestStatus = Literal["passed", "failed", "error", "skipped", "missing"]
REPORT_LIMIT = 5 * 2**20      # one file
TOTAL_LIMIT = 10 * 2**20      # all the files together
FILE_LIMIT = 16               # files named *.xml read; more are ignored
ENTRY_LIMIT = 10_000          # entries of the report folder looked at
DEPTH_LIMIT = 64              # JUnit is three or four levels deep
PARSE_LIMIT_S = 5.0           # CPU time spent parsing, all files together
CASE_LIMIT = 10_000
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class ReportedCase:
    classname: str
    name: str
    status: TestStatus

    @property
    def dotted(self) -> str:
        return f"{self.classname}.{self.name.split('[', 1)[0]}" if self.classname else self.name.split("[", 1)[0]


@dataclass
class JUnitReport:
    cases: list[ReportedCase]
    problems: list[str]


def read_reports(report_dir: Path) -> JUnitReport:
    cases: list[ReportedCase] = []
    problems: list[str] = []
    names = []
    with os.scandir(report_dir) as entries:
        for seen, entry in enumerate(entries):
            if seen >= ENTRY_LIMIT:
                problems.append(f"more than {ENTRY_LIMIT} entries in the report folder; the rest are not looked at")
                break
            if entry.name.endswith(".xml"):
                names.append(entry.name)
    names.sort()
    if len(names) > FILE_LIMIT:
        problems.append(f"{len(names)} report files; only the first {FILE_LIMIT} are read")
        names = names[:FILE_LIMIT]
    budget = TOTAL_LIMIT
    deadline = time.thread_time() + PARSE_LIMIT_S
    for name in names:
        path = report_dir / name
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode):
            problems.append(f"{name}: not a regular file")
            continue
        if info.st_size > REPORT_LIMIT:
            problems.append(f"{name}: larger than {REPORT_LIMIT // 2**20} MiB, not read")
            continue
        if info.st_size > budget:
            problems.append(f"{name}: over the {TOTAL_LIMIT // 2**20} MiB all reports may hold together, not read")
            continue
        budget -= info.st_size
        try:
            root = _parse(path, deadline)
        except _Refused as exc:
            problems.append(f"{name}: {exc}")
            continue
        except ET.ParseError as exc:
            problems.append(f"{name}: not JUnit XML: {exc}")
            continue
        for case in root.iter("testcase"):
            if len(cases) >= CASE_LIMIT:
                problems.append(f"more than {CASE_LIMIT} test cases; the rest are ignored")
                return JUnitReport(cases, problems)
            cases.append(ReportedCase(case.get("classname", ""), case.get("name", ""), _status(case)))
    return JUnitReport(cases, problems)


class _Refused(Exception):
    pass


def _parse(path: Path, deadline: float) -> ET.Element:
    """Incremental parse, in chunks, refusing deep nesting and stopping at the deadline (CPU seconds)."""
    parser = ET.XMLPullParser(events=("start", "end"))
    depth = 0
    root = None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        left = REPORT_LIMIT + 1
        while chunk := handle.read(min(_CHUNK, left)):
            left -= len(chunk)
            parser.feed(chunk)
            for event, element in parser.read_events():
                if event == "start":
                    depth += 1
                    root = element if root is None else root
                    if depth > DEPTH_LIMIT:
                        raise _Refused(f"elements nested more than {DEPTH_LIMIT} deep, not read")
                else:
                    depth -= 1
            if time.thread_time() > deadline:
                raise _Refused(f"reading the reports took over {PARSE_LIMIT_S:g}s of CPU, the rest not read")
            if left <= 0:
                raise _Refused(f"larger than {REPORT_LIMIT // 2**20} MiB, not read")
        parser.close()
        for event, _ in parser.read_events():
            depth += 1 if event == "start" else -1
    if root is None:
        raise ET.ParseError("no element found")
    return root


def _status(case: ET.Element) -> TestStatus:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"
