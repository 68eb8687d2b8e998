"""Wall time of `rubric grade` on 1,000 trajectories with deterministic checks only, start-up included.

    python benchmarks/grade_deterministic.py [--count 1000] [--repeat 3]

Target: under 2 s. Writes the trajectories (one .json file each, a realistic delivery layout) and a
rubric with every deterministic check family into a temporary folder, then times the CLI in a
subprocess, so Python start-up and imports count as they do for a user.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUBRIC = """\
version: 1
id: q3-travel-mis-deterministic
task: Prepare the Q3 travel-expense MIS for the CFO.
gates:
  - id: mis-to-cfo
    email_sent: {to: cfo@acme.test, attachment: "*MIS*"}
  - id: total-spend
    number: {in: final_answer, label: total travel spend, expected: 48.2L, tolerance: 0.5%}
criteria:
  - {id: names-unsigned, points: 3, contains: {text: [EXP-221, EXP-307]}}
  - {id: q2-compared, points: 2, regex: {pattern: "Q2[^\\\\n]*41\\\\.5 ?L"}}
  - {id: read-sheet, points: 1, tool_called: {name: read_drive, args: {path: "*travel*"}}}
  - {id: report-file, points: 1, file: {path: "reports/*.md", contains: Total}}
  - {id: status-json, points: 1, json: {in: files.status.json, path: "checks[0].ok", equals: true}}
  - {id: tests-pass, points: 1, tests: {fail_to_pass: ["tests/test_totals.py::test_sum"]}}
  - id: either-format
    points: 1
    any_of:
      - {contains: {text: MIS}}
      - {not: {contains: {in: assistant, text: sorry}}}
  - id: emails-others
    points: -2
    email_sent: {to_other_than: [cfo@acme.test]}
"""


def make_trajectory(i: int, rng: random.Random) -> dict:
    total = rng.choice(["48.2L", "₹48,20,000", "48.45L", "4.82 million", "47.9L"])
    recipients = rng.choice([["cfo@acme.test"], ["cfo@acme.test", "ceo@acme.test"], ["ceo@acme.test"]])
    answer = (f"Q3 travel MIS\nTotal travel spend: {total}\nQ2 was 41.5L.\n"
              + ("EXP-221 and EXP-307 lack sign-off.\n" if rng.random() < 0.6 else "")
              + "Department breakdown follows.\n" * rng.randint(1, 20))
    return {
        "id": f"attempt-{i:04d}", "task_id": "q3-travel-mis",
        "messages": [
            {"role": "user", "content": "Prepare the Q3 travel MIS for the CFO."},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "name": "read_drive", "arguments": {"path": "Finance/q3_travel.xlsx"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sheet " * rng.randint(10, 200)},
            {"role": "assistant", "content": answer},
        ],
        "final_answer": answer,
        "state": {
            "outbox": [{"from": "agent@acme.test", "to": recipients, "subject": "Q3 MIS", "body": answer,
                        "attachments": [{"name": rng.choice(["Q3_MIS.pdf", "notes.txt"]), "content": ""}]}],
            "files": {"reports/mis.md": answer, "status.json": json.dumps({"checks": [{"ok": rng.random() < 0.5}]})},
            "tests": {"tests/test_totals.py::test_sum": rng.choice(["PASSED", "FAILED"])},
        },
        "metadata": {},
    }


def time_grade(rubric: Path, folder: Path, output: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `rubric grade` run. CPU time is reported too because wall time
    on a shared machine measures the neighbours as much as the grader."""
    command = [sys.executable, "-m", "rubrics.cli.main", "grade", str(rubric), str(folder),
               "--judge", "none", "--format", "jsonl", "--output", str(output)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"rubric grade failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rubric-bench-"))
    try:
        rng = random.Random(0)
        folder = root / "trajectories"
        folder.mkdir()
        for i in range(args.count):
            (folder / f"attempt-{i:04d}.json").write_text(json.dumps(make_trajectory(i, rng)), encoding="utf-8")
        rubric = root / "rubric.yaml"
        rubric.write_text(RUBRIC, encoding="utf-8")
        output = root / "results.jsonl"
        runs = [time_grade(rubric, folder, output) for _ in range(args.repeat)]
        graded = sum(1 for _ in output.open(encoding="utf-8"))
        assert graded == args.count, f"graded {graded} of {args.count}"
        walls = sorted(wall for wall, _ in runs)
        cpus = sorted(cpu for _, cpu in runs)
        print(f"rubric grade: {args.count} trajectories, deterministic checks only, start-up included")
        print(f"wall time: best {walls[0]:.3f} s, median {walls[len(walls) // 2]:.3f} s; target < 2 s")
        print(f"CPU time (user+sys): best {cpus[0]:.3f} s, median {cpus[len(cpus) // 2]:.3f} s; "
              f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
