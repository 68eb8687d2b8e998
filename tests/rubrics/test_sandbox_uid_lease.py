"""Two gradings on one machine at once never share a sandbox uid: with the slot alone as the uid, two
`rubric tasks run` side by side graded under the same uids, and the end of one run killed the other's grade.sh
(its uid's leftover processes) and counted them against its process limit: honest attempts failed."""
import json
import os
import subprocess
import sys

import pytest
from sandbox_support import EXAMPLE, TIMEOUT, needs_bwrap

from rubrics.delivery.sandbox.uid_lease import UID_BASE, leased_uid

# Honest attempts and the one that leaves a process behind (whose run's end kills what its uid left).
ATTEMPTS = {"task-0417/attempt-01": "passed", "task-0418/attempt-01": "passed", "task-0420/attempt-02": "passed",
            "task-0421/attempt-03": "left-processes", "task-0421/attempt-04": "passed",
            "task-0503/attempt-01": "passed", "task-0603/attempt-01": "passed"}


def test_a_held_uid_is_skipped_and_freed_when_its_holder_ends(tmp_path):
    with leased_uid(3, tmp_path) as first:
        assert first == UID_BASE + 3
        with leased_uid(3, tmp_path) as second:
            assert second == UID_BASE + 4
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from rubrics.delivery.sandbox.uid_lease import leased_uid\n"
        f"with leased_uid(3, Path({str(tmp_path)!r})) as uid:\n"
        "    print(uid, flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert int(holder.stdout.readline()) == UID_BASE + 3
        with leased_uid(3, tmp_path) as taken:
            assert taken == UID_BASE + 4
    finally:
        holder.kill()
        holder.wait()
    with leased_uid(3, tmp_path) as again:      # the kernel dropped the killed holder's lock
        assert again == UID_BASE + 3


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="sandbox uids are leased only as root")
def test_two_runs_at_once_keep_each_others_results(tmp_path):
    attempts = tmp_path / "attempts"
    for name in ATTEMPTS:
        task, attempt = name.split("/")
        source = EXAMPLE / "attempts" / task
        (attempts / task).mkdir(parents=True, exist_ok=True)
        for found in source.glob(f"{attempt}*"):
            target = attempts / task / found.name
            if found.is_dir():
                subprocess.run(["cp", "-r", found, target], check=True)
            else:
                target.write_bytes(found.read_bytes())
    outs = [tmp_path / f"results-{n}.jsonl" for n in range(2)]
    runs = [subprocess.Popen([sys.executable, "-m", "rubrics.cli.main", "tasks", "run", str(EXAMPLE), "--attempts",
                              str(attempts), "--timeout", TIMEOUT, "--output", str(out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for out in outs]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
    for out in outs:
        statuses = {r["trajectory_id"]: r["status"] for r in map(json.loads, out.read_text().splitlines())}
        assert statuses == ATTEMPTS
