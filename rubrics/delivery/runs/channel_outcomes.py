"""The verdict's source when grade.sh's pytest ran under the harness's result channel: the channel, not the report.

The JUnit file and the exit status are written by the process the tested code runs in, so they are what an
in-process forge rewrites; the channel's records are signed with a key that process read before any attempt
code ran (see sandbox/result_channel*.py). When the channel saw a pytest run start, each test's status comes
from it alone: a test it never heard of is `missing`, a run that started and never ended (an `os._exit` at
import) or a record that fails its check fails the attempt, and a report that disagrees is ignored and named.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from rubrics.delivery.runs.junit import JUnitReport, ReportedCase
from rubrics.delivery.sandbox.result_channel import ChannelLog

DISAGREES = "the report disagrees with what the tests did: ignored, the harness's result channel decides"
UNFINISHED = ("the test run ended before pytest finished (the result channel has no end of session): "
              "a report written then is ignored")


@dataclass(frozen=True)
class ChannelVerdict:
    cases: JUnitReport        # the channel's outcomes, in the report's shape, so that tests are matched alike
    broken: str | None        # why the run cannot pass whatever the tests say: unfinished, or a bad record


def channel_verdict(log: ChannelLog) -> ChannelVerdict:
    cases = [_case(node, status) for node, status in log.tests.items()]
    broken = None
    if log.problems:
        broken = "the result channel was tampered with: " + "; ".join(log.problems)
    elif log.unfinished:
        broken = UNFINISHED
    return ChannelVerdict(JUnitReport(cases, []), broken)


def _case(node_id: str, status: str) -> ReportedCase:
    """pytest's node id as its JUnit writer names it: `a/b.py::C::t[x]` -> classname `a.b.C`, name `t[x]`."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ReportedCase(".".join(names[:-1]), names[-1], status)  # type: ignore[arg-type]
