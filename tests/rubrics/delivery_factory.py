"""Build valid task folders and graded-result lines in a temporary directory; tests break one thing at a time."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

VALID_PATCH = """diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f(x):
-    return x
+    return x + 1
"""

GRADE = "#!/usr/bin/env bash\nset -u\npython -m pytest -q tests/\n"


def task_data(**overrides) -> dict:
    data = {
        "instruction": "Fix the off-by-one in pkg.mod.f so that f(1) returns 2.",
        "repo": "pkg",
        "commit": "a91c3e2",
        "tools": ["bash", "edit_file"],
        "max_steps": 20,
        "metadata": {"category": "bugs", "difficulty": "easy", "group": None, "reviewers": ["ana"]},
    }
    metadata = overrides.pop("metadata", {})
    data.update(overrides)
    data["metadata"] = {**data["metadata"], **metadata}
    if data["metadata"]["group"] is None:
        del data["metadata"]["group"]
    return data


def make_task(folder: Path, **overrides) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(yaml.safe_dump(task_data(**overrides), sort_keys=False))
    (folder / "Dockerfile").write_text("FROM python:3.11-slim\nRUN pip install pytest\n")
    (folder / "tools.json").write_text(json.dumps([{"type": "function", "function": {"name": "bash"}},
                                                   {"name": "edit_file"}]))
    tests = folder / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_fail_to_pass.py").write_text("from pkg.mod import f\n\n\ndef test_fixed():\n    assert f(1) == 2\n")
    (tests / "test_pass_to_pass.py").write_text("def test_still_fine():\n    assert True is not False\n")
    (folder / "solution.patch").write_text(VALID_PATCH)
    grade = folder / "grade.sh"
    grade.write_text(GRADE)
    grade.chmod(0o755)
    return folder


def result_line(task_id: str, trajectory_id: str, score: float, complete: bool = True) -> str:
    return json.dumps({"trajectory_id": trajectory_id, "task_id": task_id, "rubric_id": "r", "score": score,
                       "gates_passed": score > 0, "earned": 0, "total": 1, "complete": complete, "items": [],
                       "errors": [], "judge": None})


def write_results(path: Path, per_task: dict[str, list[float]]) -> Path:
    lines = [result_line(task_id, f"{task_id}/attempt-{i:02d}", s)
             for task_id, scores in per_task.items() for i, s in enumerate(scores, 1)]
    path.write_text("\n".join(lines) + "\n")
    return path
