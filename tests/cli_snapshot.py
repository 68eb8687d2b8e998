"""What the CLI prints and writes on every bundled example, kept so that a change meant to leave behaviour alone
(a refactor, a move) can be checked byte for byte:

    python tests/cli_snapshot.py record tests/cli_snapshot.json    # before the change
    python tests/cli_snapshot.py compare tests/cli_snapshot.json   # after it: exit 1 and a diff if anything moved

Each command runs in a subprocess (`python -m rubrics.cli.main`) from a scratch copy of examples/, so that paths in
the output are the same wherever the repository lies. The embedded judge is the test suite's model
(smollm2-135m-instruct, fast on a CPU). Only what varies from run to run is masked: timings (the judge's speed
line and its progress lines, the seconds of `tasks run`, pytest's durations), object addresses in log tails, and
the order in which parallel attempts report their progress.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JUDGE_MODEL = "smollm2-135m-instruct"
DELIVERY_OUTPUTS = ["validation.json", "results.jsonl", "candidate-results.jsonl", "pass_rates.json", "split.json",
                    "report.md", "report.json", "pass-rates.svg", "uplift.md", "uplift.json", "uplift.svg"]
PYTEST_DURATION = re.compile(r" in \d+\.\d+s")
# what a run's own timing and memory layout put in the text: "judged 40 items in 13.6s (2.94 judgments/s) after
# 2.5s", the seconds column of `tasks run`, object addresses in a pytest log tail
VOLATILE = [(re.compile(r"\(\d+\.\d+ judgments/s\) after \d+\.\d+s"), "(N judgments/s) after Ns"),
            (re.compile(r"(\d+/\d+ +\d+/\d+ +)\d+\.\d+"), r"\g<1>N"),
            (re.compile(r"0x[0-9a-f]{6,}"), "0xADDRESS")]
# the judge's progress on a piped stderr, one line every 10 s of judging: how many depends on the machine's speed
PROGRESS_LINE = re.compile(r"^judging \(\d+(h\d+m|m\d+s|s)\): ")


def graded_folders(examples: Path) -> list[Path]:
    """Every example folder with a rubric.yaml and a trajectories/ folder beside it."""
    return sorted(p.parent for p in examples.rglob("rubric.yaml") if (p.parent / "trajectories").is_dir())


def commands(examples: Path) -> list[list[str]]:
    relative = [p.relative_to(examples.parent) for p in graded_folders(examples)]
    rubrics = sorted(str(p.relative_to(examples.parent)) for p in examples.rglob("*.yaml")
                     if p.name.startswith("rubric") and "/repo/" not in str(p))
    runs: list[list[str]] = [["lint", rubric] for rubric in rubrics]
    runs.append(["lint", "examples"])
    for folder in relative:
        runs.append(["grade", f"{folder}/rubric.yaml", f"{folder}/trajectories/", "--judge", "none"])
        runs.append(["grade", f"{folder}/rubric.yaml", f"{folder}/trajectories/", "--judge", "none",
                     "--format", "jsonl"])
    for adapted in sorted((examples / "adapters").iterdir()):
        runs.append(["grade", "examples/cfo-mis/rubric.yaml", str(adapted.relative_to(examples.parent)),
                     "--judge", "none", "--format", "json"])
    for folder in ("examples/cfo-mis", "examples/invoice-fix"):   # the embedded judge, end to end, not the cache
        runs.append(["grade", f"{folder}/rubric.yaml", f"{folder}/trajectories/", "--format", "jsonl", "--no-cache"])
    runs.append(["grade", "examples/cfo-mis/rubric.yaml", "examples/cfo-mis/trajectories/", "--verbose", "--no-cache"])
    runs += [["schema", kind] for kind in ("rubric", "trajectory", "result")]
    return runs


DELIVERY = [
    ["tasks", "check", "examples/delivery"],
    ["tasks", "validate", "examples/delivery", "--jobs", "2", "--timeout", "8"],
    ["tasks", "run", "examples/delivery", "--attempts", "examples/delivery/attempts", "--jobs", "2",
     "--timeout", "8"],
    ["tasks", "run", "examples/delivery", "--attempts", "examples/delivery/candidate-attempts", "--jobs", "2",
     "--timeout", "8", "--output", "examples/delivery/candidate-results.jsonl"],
    ["pass-rates", "examples/delivery", "--results", "examples/delivery/results.jsonl", "--attempts", "3", "--k", "2"],
    ["split", "examples/delivery", "--heldout", "0.2", "--seed", "7"],
    ["report", "examples/delivery"],
    ["report", "examples/delivery", "--baseline", "examples/delivery/results.jsonl", "--candidate",
     "examples/delivery/candidate-results.jsonl"],
]


def unvaried(text: str) -> str:
    text = PYTEST_DURATION.sub(" in Ns", text)
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def masked(text: str) -> str:
    """The run's own timings out of a results line; durations and addresses out of any text; no progress lines."""
    lines = []
    for line in text.splitlines():
        if PROGRESS_LINE.match(line):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            lines.append(unvaried(line))
            continue
        if isinstance(record, dict) and "timings" in record:
            record["timings"] = "masked"
            if isinstance(record.get("log_tail"), str):
                record["log_tail"] = unvaried(record["log_tail"])
            line = json.dumps(record, sort_keys=True)
        lines.append(line)
    return "\n".join(lines)


def run(arguments: list[str], cwd: Path) -> dict:
    env = {**os.environ, "RUBRICS_JUDGE_MODEL": JUDGE_MODEL, "NO_COLOR": "1", "COLUMNS": "160", "TERM": "dumb",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", *arguments], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1200)

    def placed(text: str) -> str:
        return masked(text.replace(str(cwd), "<scratch>").replace(str(REPO), "<repo>"))
    stderr = placed(done.stderr)
    if arguments[0] == "tasks":   # one progress line per attempt as it finishes: in the order the jobs happened to end
        stderr = "\n".join(sorted(stderr.splitlines()))
    return {"rc": done.returncode, "stdout": placed(done.stdout), "stderr": stderr}


def snapshot() -> dict[str, dict]:
    taken: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        shutil.copytree(REPO / "examples", root / "examples")
        for name in DELIVERY_OUTPUTS:   # made afresh by the delivery commands
            (root / "examples" / "delivery" / name).unlink(missing_ok=True)
        for arguments in commands(root / "examples") + DELIVERY:
            taken[" ".join(arguments)] = run(arguments, root)
            print(f"{taken[' '.join(arguments)]['rc']}  rubric {' '.join(arguments)}", file=sys.stderr, flush=True)
        for name in DELIVERY_OUTPUTS:
            path = root / "examples" / "delivery" / name
            taken[f"file examples/delivery/{name}"] = {"text": masked(path.read_text()) if path.exists() else None}
    return taken


def differences(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    lines = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) == after.get(key):
            continue
        lines.append(f"--- changed: {key}")
        old, new = before.get(key) or {}, after.get(key) or {}
        for part in sorted(set(old) | set(new)):
            if old.get(part) != new.get(part):
                lines += list(difflib.unified_diff(str(old.get(part)).splitlines(), str(new.get(part)).splitlines(),
                                                   f"before {part}", f"after {part}", lineterm="", n=0))[:60]
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    verb, path = argv[0], Path(argv[1])
    taken = snapshot()
    if verb == "record":
        path.write_text(json.dumps(taken, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(taken)} outputs in {path}")
        return 0
    path.with_name(path.stem + ".after.json").write_text(json.dumps(taken, indent=1, sort_keys=True) + "\n")
    changed = differences(json.loads(path.read_text()), taken)
    print("\n".join(changed) if changed else f"all {len(taken)} outputs as recorded in {path}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
