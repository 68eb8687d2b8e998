"""In-process time of the code checks alone: 1,000 trajectories x 8 checks, loading excluded.

    python benchmarks/checks_run.py [--count 1000] [--repeat 5]

Target: well under 1 s (checks only; `grade_deterministic.py` times the whole CLI). Each repeat loads fresh
trajectories, so selector renderings are computed as in a real run, not served from a warm cache.
"""

from __future__ import annotations

import argparse
import random
import time

from rubrics.checks import run_check
from rubrics.trajectory import load_trajectory

CHECKS = [
    ("email_sent", {"to": "cfo@acme.test", "attachment": "*MIS*"}),
    ("number", {"in": "final_answer", "label": "total travel spend", "expected": "48.2L", "tolerance": "0.5%"}),
    ("contains", {"in": "transcript", "text": ["EXP-221", "EXP-307"]}),
    ("regex", {"in": "assistant", "pattern": r"Q2[^\n]*41\.5 ?L"}),
    ("tool_called", {"name": "read_*", "args": {"path": "*travel*"}}),
    ("file", {"path": "reports/*.md", "contains": "total"}),
    ("json", {"in": "files.status.json", "path": "checks[0].ok", "equals": True}),
    ("tests", {"fail_to_pass": ["tests/test_totals.py::test_sum"]}),
]


def make_trajectory(i: int, rng: random.Random) -> dict:
    total = rng.choice(["48.2L", "₹48,20,000", "48.45L", "4.82 million", "47.9L"])
    answer = (
        f"Q3 travel MIS\nTotal travel spend: {total}\nQ2 was 41.5L.\n"
        + ("EXP-221 and EXP-307 lack sign-off.\n" if rng.random() < 0.6 else "")
        + "Department breakdown follows.\n" * rng.randint(1, 20)
    )
    calls = [{"id": f"c{n}", "name": "read_drive", "arguments": {"path": f"Finance/q3_travel_{n}.xlsx"}} for n in range(rng.randint(1, 10))]
    return {
        "id": f"attempt-{i:04d}",
        "messages": [
            {"role": "user", "content": "Prepare the Q3 travel MIS for the CFO."},
            {"role": "assistant", "content": "", "tool_calls": calls},
            *({"role": "tool", "tool_call_id": c["id"], "content": "sheet " * rng.randint(10, 200)} for c in calls),
            {"role": "assistant", "content": answer},
        ],
        "final_answer": answer,
        "state": {
            "outbox": [{"to": rng.choice([["cfo@acme.test"], ["ceo@acme.test"]]), "subject": "Q3 MIS", "body": answer,
                        "attachments": [{"name": rng.choice(["Q3_MIS.pdf", "notes.txt"])}]}],
            "files": {"reports/mis.md": answer, "status.json": '{"checks": [{"ok": true}]}'},
            "tests": {"tests/test_totals.py::test_sum": rng.choice(["PASSED", "FAILED"])},
        },
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(0)
    data = [make_trajectory(i, rng) for i in range(args.count)]
    times = []
    for _ in range(args.repeat):
        trajectories = [load_trajectory(d) for d in data]
        start = time.perf_counter()
        met = sum(run_check(key, config, t).met for t in trajectories for key, config in CHECKS)
        times.append(time.perf_counter() - start)
    print(f"{args.count} trajectories x {len(CHECKS)} checks: {met} met")
    print(f"time: best {min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s; target well under 1 s")


if __name__ == "__main__":
    main()
