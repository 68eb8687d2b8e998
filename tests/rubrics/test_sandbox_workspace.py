"""Building workspaces from hostile attempts, reading grader reports, and the runtimes' refusals, without a sandbox."""
import os
import stat

import pytest

from rubrics.delivery.runs.attempts import AttemptRef, discover_attempts
from rubrics.delivery.runs.junit import read_reports
from rubrics.delivery.sandbox.base import SandboxUnavailable
from rubrics.delivery.sandbox.bwrap import BwrapSandbox
from rubrics.delivery.sandbox.docker import DockerSandbox
from rubrics.delivery.sandbox.workspace import WorkspaceError, build_workspace, copy_tree, restore_tests, touched_tests


def _tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_linked_tests_folder_is_replaced_not_followed(tmp_path):
    outside = _tree(tmp_path / "outside", {"keep.txt": "mine"})
    hidden = _tree(tmp_path / "hidden", {"test_fail_to_pass.py": "def test_a(): pass\n"})
    start = _tree(tmp_path / "start", {"pkg/mod.py": "x = 1\n"})
    snap = _tree(tmp_path / "snap", {"pkg/mod.py": "x = 2\n"})
    os.symlink(outside, snap / "tests")
    work = tmp_path / "ws"
    build_workspace(AttemptRef("t", "a", "snapshot", snap), start, work)
    assert (work / "tests").is_symlink()
    assert touched_tests(start, work, hidden) == ["tests/test_fail_to_pass.py"]
    restore_tests(work, hidden)
    assert not (work / "tests").is_symlink() and sorted(os.listdir(work / "tests")) == ["test_fail_to_pass.py"]
    assert (outside / "keep.txt").read_text() == "mine"


def test_special_files_and_escaping_patches_are_refused(tmp_path):
    start = _tree(tmp_path / "start", {"pkg/mod.py": "x = 1\n"})
    snap = _tree(tmp_path / "snap", {"a.py": ""})
    os.mkfifo(snap / "pipe")     # copying would block forever on open()
    with pytest.raises(WorkspaceError, match="not a regular file"):
        build_workspace(AttemptRef("t", "a", "snapshot", snap), start, tmp_path / "ws1")
    escape = tmp_path / "escape.patch"
    escape.write_text("diff --git a/../evil.py b/../evil.py\nnew file mode 100644\n--- /dev/null\n+++ b/../evil.py\n"
                      "@@ -0,0 +1 @@\n+x = 1\n")
    with pytest.raises(WorkspaceError, match="does not apply"):
        build_workspace(AttemptRef("t", "a", "patch", escape), start, tmp_path / "ws2")
    assert not (tmp_path / "evil.py").exists()


def test_copy_is_bounded(tmp_path):
    from rubrics.delivery.sandbox.workspace import CopyBudget

    src = _tree(tmp_path / "src", {f"f{i}.txt": "x" * 100 for i in range(5)})
    with pytest.raises(WorkspaceError, match="more files"):
        copy_tree(src, tmp_path / "dst", CopyBudget(files=3))
    with pytest.raises(WorkspaceError, match="larger than"):
        copy_tree(src, tmp_path / "dst2", CopyBudget(bytes=250))


def test_attempt_listing_names_what_is_not_an_attempt(tmp_path):
    _tree(tmp_path, {"t1/a.patch": "", "t1/b/x.py": "", "t1/notes.txt": "", "zz/a.patch": ""})
    listing = discover_attempts(tmp_path, {"t1"})
    assert [(a.name, a.kind) for a in listing.attempts] == [("a", "patch"), ("b", "snapshot")]
    assert len(listing.problems) == 2 and "notes.txt" in listing.problems[0] and "no task 'zz'" in listing.problems[1]


def test_junit_reports_are_read_within_bounds(tmp_path):
    (tmp_path / "a.xml").write_text(
        '<testsuites><testsuite><testcase classname="test_x" name="test_ok"/>'
        '<testcase classname="test_x" name="test_bad"><failure/></testcase>'
        '<testcase classname="test_x" name="test_err"><error/></testcase></testsuite></testsuites>')
    (tmp_path / "b.xml").write_text("<not closed")
    report = read_reports(tmp_path)
    assert [(c.name, c.status) for c in report.cases] == [("test_ok", "passed"), ("test_bad", "failed"),
                                                          ("test_err", "error")]
    assert report.problems and report.problems[0].startswith("b.xml: not JUnit XML")


def test_runtimes_that_cannot_run_say_so(tmp_path):
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        _missing_bwrap()
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(SandboxUnavailable, match="no Docker daemon reachable.*Cannot connect"):
        DockerSandbox(docker=str(fake))


def _missing_bwrap():
    import shutil
    from unittest import mock

    with mock.patch.object(shutil, "which", return_value=None):
        BwrapSandbox()
