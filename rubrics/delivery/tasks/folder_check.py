"""`rubric tasks check`: is every task folder complete and consistent enough to ship?"""
from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

from rubrics.delivery.tasks.hidden_tests import classify_tests, defines_no_test
from rubrics.delivery.tasks.layout import DeliveryFolder, discover
from rubrics.rubric.problems import WARNING, Problem
from rubrics.delivery.tasks.rubric_lint import lint_rubric
from rubrics.delivery.tasks.task import TASK_FILE, TaskSpec, load_task_spec
from rubrics.delivery.tasks.tools_file import TOOLS_FILE, read_tool_names

DOCKERFILE = "Dockerfile"
TESTS_DIR = "tests"
SOLUTION = "solution.patch"
GRADER = "grade.sh"

_DIFF_HEADER = re.compile(r"^(diff --git |--- |\+\+\+ )", re.MULTILINE)
_FROM = re.compile(r"^\s*FROM\s+\S", re.MULTILINE | re.IGNORECASE)


def check_delivery(root: Path) -> tuple[DeliveryFolder, list[Problem]]:
    """All problems of all task folders under `root`, in folder order; paths are shown under `root`."""
    delivery = discover(root)
    problems: list[Problem] = []
    if not delivery.all_tasks():
        problems.append(Problem.about(str(root), "no task folders found (expected tasks/*/, heldout/*/ or */)", "no-tasks"))
    sides_by_id: dict[str, list[str]] = defaultdict(list)
    for ref in delivery.all_tasks():
        sides_by_id[ref.id].append(ref.path)
        problems.extend(check_task_folder(root / ref.path, _shown(root, ref.path), ref.id))
    for task_id, paths in sorted(sides_by_id.items()):
        if len(paths) > 1:
            problems.append(Problem.about(str(root), f"task id {task_id!r} appears twice: {', '.join(paths)}", "duplicate-id"))
    return delivery, problems


def check_task_folder(folder: Path, shown: str, folder_id: str) -> list[Problem]:
    def at(name: str) -> str:
        return f"{shown}/{name}" if shown != "." else name

    if not (folder / TASK_FILE).is_file():
        spec, problems = None, [Problem.about(at(TASK_FILE), "missing", "missing-file")]
    else:
        spec, problems = load_task_spec(folder / TASK_FILE, at(TASK_FILE))
    if spec is not None and spec.id is not None and spec.id != folder_id:
        problems.append(Problem.about(at(TASK_FILE), f"id: {spec.id!r} differs from the folder name {folder_id!r}", "id-mismatch"))
    if spec is not None and not spec.metadata.reviewers:
        problems.append(Problem.about(at(TASK_FILE), "metadata.reviewers: nobody recorded as reviewer", "unreviewed", WARNING))
    problems += _check_dockerfile(folder / DOCKERFILE, at(DOCKERFILE))
    problems += _check_tools(folder / TOOLS_FILE, at(TOOLS_FILE), spec)
    problems += _check_grader(folder / GRADER, at(GRADER))
    if spec is not None and spec.rubric is not None:
        problems += _check_rubric(folder, spec.rubric, at(spec.rubric))
    else:
        # A task graded by tests must prove both that the bug is fixed and that nothing else broke,
        # and must be solvable: hence tests/ split in two kinds, and the reference fix.
        problems += _check_tests(folder / TESTS_DIR, at(TESTS_DIR))
        problems += _check_solution(folder / SOLUTION, at(SOLUTION))
    return problems


def _shown(root: Path, rel: str) -> str:
    return str(root) if rel == "." else str(root / rel)


def _check_dockerfile(path: Path, shown: str) -> list[Problem]:
    if not path.is_file():
        return [Problem.about(shown, "missing", "missing-file")]
    if not _FROM.search(path.read_text(encoding="utf-8", errors="replace")):
        return [Problem.about(shown, "no FROM instruction", "dockerfile-no-from")]
    return []


def _check_tools(path: Path, shown: str, spec: TaskSpec | None) -> list[Problem]:
    if not path.is_file():
        return [Problem.about(shown, "missing", "missing-file")]
    try:
        declared = read_tool_names(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        return [Problem.about(shown, str(exc), "tools-invalid")]
    if spec is None:
        return []
    unknown = [name for name in spec.tools if name not in declared]
    if unknown:
        return [Problem.about(shown, f"task.yaml tools not declared here: {', '.join(unknown)}", "tools-undeclared")]
    return []


def _check_grader(path: Path, shown: str) -> list[Problem]:
    if not path.is_file():
        return [Problem.about(shown, "missing", "missing-file")]
    problems = []
    if not os.access(path, os.X_OK):
        problems.append(Problem.about(shown, "not executable (run: chmod +x grade.sh)", "grade-not-executable"))
    with path.open("rb") as handle:
        if handle.read(2) != b"#!":
            problems.append(Problem.about(shown, "no #! line: the interpreter is left to chance", "grade-no-shebang", WARNING))
    return problems


def _check_tests(tests_dir: Path, shown: str) -> list[Problem]:
    if not tests_dir.is_dir():
        return [Problem.about(shown, "missing (hidden tests: fail-to-pass and pass-to-pass)", "missing-file")]
    layout = classify_tests(tests_dir)
    problems = []
    if not layout.fail_to_pass:
        problems.append(Problem.about(shown, "no fail-to-pass tests (a file or folder named *fail_to_pass*)", "no-fail-to-pass"))
    if not layout.pass_to_pass:
        problems.append(Problem.about(shown, "no pass-to-pass tests (a file or folder named *pass_to_pass*)", "no-pass-to-pass"))
    for path in layout.unclassified:
        rel = path.relative_to(tests_dir).as_posix()
        problems.append(Problem.about(f"{shown}/{rel}", "test file is neither fail-to-pass nor pass-to-pass", "tests-unsplit"))
    for path in layout.fail_to_pass + layout.pass_to_pass:
        if defines_no_test(path):
            rel = path.relative_to(tests_dir).as_posix()
            problems.append(Problem.about(f"{shown}/{rel}", "defines no test function or Test class", "tests-empty"))
    return problems


def _check_solution(path: Path, shown: str) -> list[Problem]:
    if not path.is_file():
        return [Problem.about(shown, "missing (the reference fix proves the task solvable)", "missing-file")]
    text = path.read_text(encoding="utf-8", errors="replace")
    if not _DIFF_HEADER.search(text):
        return [Problem.about(shown, "not a unified diff (no 'diff --git' or '---'/'+++' header)", "solution-not-diff")]
    touched = re.findall(r"^\+\+\+ (?:b/)?(\S+)", text, re.MULTILINE)
    if any(p == TESTS_DIR or p.startswith(TESTS_DIR + "/") for p in touched):
        # grade.sh restores tests/ from a sealed copy, so a fix that needs test edits cannot pass.
        return [Problem.about(shown, "edits files under tests/, which grading restores", "solution-edits-tests", WARNING)]
    return []


def _check_rubric(folder: Path, rel: str, shown: str) -> list[Problem]:
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        return [Problem.about(shown, "rubric path leaves the task folder", "rubric-outside")]
    if not path.is_file():
        return [Problem.about(shown, "missing (named by task.yaml rubric:)", "missing-file")]
    return lint_rubric(path, shown)
