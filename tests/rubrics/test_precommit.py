"""The rubric-lint hook from a hook repository: passes on the example rubric, fails on a broken one.

`pre-commit try-repo`, and the README's hook-repository recipe run verbatim, both install the hook repository
into a fresh virtualenv, so the tests build a throwaway git repository holding a copy of the package (the
project's own repository is never touched). tests/test_readme_precommit.py runs the README's local recipe.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rubric_fakes import EXAMPLE_RUBRIC, REPO

from tests.package_copy import copy_package

pytestmark = pytest.mark.slow


def pre_commit_executable() -> str | None:
    return shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or shutil.which("pre-commit")


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    if pre_commit_executable() is None or shutil.which("git") is None:
        pytest.skip("pre-commit or git is not installed")
    repo = copy_package(tmp_path_factory.mktemp("hook-repo"))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hook repo")
    return repo


def try_repo(hook_repo: Path, target: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run([pre_commit_executable(), "try-repo", str(hook_repo), "rubric-lint", "--all-files"],
                          cwd=target, env=env, capture_output=True, text=True, timeout=900)


def test_try_repo_passes_on_the_example_and_fails_on_a_broken_rubric(hook_repo, tmp_path):
    target = tmp_path / "project"
    (target / "rubrics").mkdir(parents=True)
    shutil.copy2(EXAMPLE_RUBRIC, target / "rubrics" / "rubric.yaml")
    (target / "notes.yaml").write_text("not: [a rubric")   # outside the hook's file pattern: never linted
    git(target, "init", "-q")
    git(target, "add", "-A")
    home = tmp_path / "pre-commit-home"
    good = try_repo(hook_repo, target, home)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "rubric lint" in good.stdout and "Passed" in good.stdout

    (target / "team.rubric.yaml").write_text(EXAMPLE_RUBRIC.read_text().replace("points: 3", "points: 0"))
    git(target, "add", "-A")
    bad = try_repo(hook_repo, target, home)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout and "team.rubric.yaml:17:34: error: criteria[0].points" in bad.stdout and "[zero-points]" in bad.stdout


def readme_hook_repository_recipe() -> str:
    page = (REPO / "docs" / "guide" / "cli.md").read_text(encoding="utf-8")
    section = page.split("\n## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    blocks = [body for body in re.findall(r"^```bash\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
              if "rev:" in body]
    assert len(blocks) == 1, "the guide shows one hook-repository recipe"
    return blocks[0]


def test_the_readme_hook_repository_recipe_works_verbatim(hook_repo, tmp_path):
    """The recipe expects a clone of this repository at ../agent-rubrics, next to the project."""
    recipe = readme_hook_repository_recipe()
    (tmp_path / "agent-rubrics").symlink_to(hook_repo, target_is_directory=True)
    target = tmp_path / "project"
    (target / "rubrics").mkdir(parents=True)
    shutil.copy2(EXAMPLE_RUBRIC, target / "rubrics" / "rubric.yaml")
    git(target, "init", "-q")
    git(target, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
           "PATH": os.path.dirname(pre_commit_executable()) + os.pathsep + os.environ.get("PATH", "")}

    good = subprocess.run(["bash", "-c", recipe], cwd=target, env=env, capture_output=True, text=True, timeout=900)
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(r"rubric lint\.+Passed", good.stdout), good.stdout
    config = (target / ".pre-commit-config.yaml").read_text()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hook_repo, capture_output=True, text=True).stdout.strip()
    assert f"rev: {head}" in config and f"repo: {tmp_path / 'agent-rubrics'}" in config

    (target / "team.rubric.yaml").write_text(EXAMPLE_RUBRIC.read_text().replace("points: 3", "points: 0"))
    git(target, "add", "-A")
    bad = subprocess.run([pre_commit_executable(), "run", "--all-files"], cwd=target, env=env, capture_output=True,
                         text=True, timeout=900)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "team.rubric.yaml:17:34: error: criteria[0].points" in bad.stdout and "[zero-points]" in bad.stdout
