"""Test outcomes from the JUnit XML files a grader writes into REPORT_DIR (pytest --junitxml, and most runners)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TestStatus = Literal["passed", "failed", "error", "skipped", "missing"]
REPORT_LIMIT = 5 * 2**20      # a report is written by the attempt's own processes too: bounded like any input
CASE_LIMIT = 10_000


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
    for path in sorted(report_dir.glob("*.xml")):
        if path.is_symlink() or not path.is_file():
            problems.append(f"{path.name}: not a regular file")
            continue
        if path.stat().st_size > REPORT_LIMIT:
            problems.append(f"{path.name}: larger than {REPORT_LIMIT // 2**20} MiB, not read")
            continue
        try:
            root = ET.fromstring(path.read_bytes())
        except ET.ParseError as exc:
            problems.append(f"{path.name}: not JUnit XML: {exc}")
            continue
        for case in root.iter("testcase"):
            if len(cases) >= CASE_LIMIT:
                problems.append(f"more than {CASE_LIMIT} test cases; the rest are ignored")
                return JUnitReport(cases, problems)
            cases.append(ReportedCase(case.get("classname", ""), case.get("name", ""), _status(case)))
    return JUnitReport(cases, problems)


def _status(case: ET.Element) -> TestStatus:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"
