"""The guide's local pre-commit recipe (docs/guide/cli.md, "pre-commit"), verbatim: `pre-commit run --all-files`
passes a good rubric and fails a broken one, in a throwaway git repository (the local hook runs the installed
`rubric` command, so nothing is fetched). tests/rubrics/test_precommit.py runs the guide's hook-repository recipe.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "guide" / "cli.md"   # the command line's page holds the hook that runs `rubric lint`
EXAMPLE_RUBRIC = REPO / "examples" / "cfo-mis" / "rubric.yaml"
BIN = Path(sys.executable).parent


def precommit_section() -> str:
    page = PAGE.read_text(encoding="utf-8")
    return page.split("\n## pre-commit\n", 1)[1].split("\n## ", 1)[0]


def local_recipe() -> str:
    blocks = [body for body in re.findall(r"^```yaml\n(.*?)^```$", precommit_section(), re.MULTILINE | re.DOTALL)
              if "repo: local" in body]
    assert len(blocks) == 1, "the guide shows one local-hook .pre-commit-config.yaml"
    return blocks[0]


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def pre_commit(cwd: Path, home: Path) -> subprocess.CompletedProcess:
    executable = shutil.which("pre-commit", path=str(BIN)) or shutil.which("pre-commit")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([executable, "run", "--all-files"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_local_hook_matches_the_hook_this_repository_publishes():
    [repo] = yaml.safe_load(local_recipe())["repos"]
    [hook] = repo["hooks"]
    [published] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert repo["repo"] == "local"
    assert {k: hook[k] for k in ("id", "entry", "files", "types")} == \
           {k: published[k] for k in ("id", "entry", "files", "types")}


def test_the_local_recipe_passes_a_good_rubric_and_fails_a_broken_one(tmp_path):
    if shutil.which("git") is None or (shutil.which("pre-commit", path=str(BIN)) or shutil.which("pre-commit")) is None:
        pytest.skip("git or pre-commit is not installed")
    project = tmp_path / "project"
    (project / "rubrics").mkdir(parents=True)
    (project / ".pre-commit-config.yaml").write_text(local_recipe())
    shutil.copy2(EXAMPLE_RUBRIC, project / "rubrics" / "rubric.yaml")
    (project / "notes.yaml").write_text("not: [a rubric")   # outside the hook's file pattern: never linted
    git(project, "init", "-q")
    git(project, "add", "-A")
    home = tmp_path / "pre-commit-home"

    good = pre_commit(project, home)
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(r"rubric lint\.+Passed", good.stdout), good.stdout

    (project / "team.rubric.yaml").write_text(EXAMPLE_RUBRIC.read_text().replace("points: 3", "points: 0"))
    git(project, "add", "-A")
    bad = pre_commit(project, home)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"rubric lint\.+Failed", bad.stdout), bad.stdout
    assert "team.rubric.yaml:17:34: error: criteria[0].points" in bad.stdout and "[zero-points]" in bad.stdout
    assert "notes.yaml" not in bad.stdout
