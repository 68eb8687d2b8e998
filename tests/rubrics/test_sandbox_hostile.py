"""Red-team reproductions of issue 26, kept as tests: forged rewards (a planted pytest.py, an atexit hook that
rewrites the report), a host flooded by an attempt (binary patch bombs, /tmp, /repo and /report filled,
memory spread over many processes, a report folder of deep XML) and nested user namespaces. The sandbox
ones run the real bubblewrap sandbox, through the CLI where the CLI can say it."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_support import EXAMPLE, TIMEOUT, needs_bwrap, rubric

from rubrics.delivery.runs import junit
from rubrics.delivery.sandbox import workspace
from rubrics.delivery.runs.attempts import AttemptRef
from rubrics.delivery.runs.grade_attempt import grade_attempt, graded_task
from rubrics.delivery.runs.junit import read_reports
from rubrics.delivery.sandbox.bwrap import BwrapSandbox, bwrap_arguments
from rubrics.delivery.sandbox.cgroup import TreeCap
from rubrics.delivery.sandbox.cgroup import available as cgroups_available
from rubrics.delivery.sandbox.limits import SandboxLimits
from rubrics.delivery.sandbox.shadow_probe import FORGE
from rubrics.delivery.sandbox.workspace import WorkspaceError, apply_patch, build_workspace

START_0417 = EXAMPLE / "tasks" / "task-0417" / "repo"
# The atexit forge the docs used to admit: the package under test registers a hook that, once pytest has
# written its report and is exiting, rewrites the report naming every test passed and exits 0.
ATEXIT_FORGE = '''import atexit, os, sys


def _forge():
    path = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml=")), None)
    if path is None and "--junitxml" in sys.argv:
        path = sys.argv[sys.argv.index("--junitxml") + 1]
    names = [("test_fail_to_pass", "test_fail_to_pass_1"), ("test_fail_to_pass", "test_fail_to_pass_2"),
             ("test_pass_to_pass", "test_pass_to_pass_1"), ("test_pass_to_pass", "test_pass_to_pass_2")]
    with open(path or os.path.join(os.environ["REPORT_DIR"], "junit.xml"), "w") as f:
        f.write("<testsuites><testsuite name='pytest'>" + "".join(
            f"<testcase classname='{c}' name='{n}'/>" for c, n in names) + "</testsuite></testsuites>")
    os._exit(0)


atexit.register(_forge)
'''
# The example grader as it was before issue 26: `python -m pytest` from /repo, /repo first on sys.path.
OLD_GRADE = """#!/usr/bin/env bash
set -u
cd /repo
sealed="${SEALED_TESTS:-/sealed/tests}"
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONDONTWRITEBYTECODE=1
exec python -m pytest -q -p no:cacheprovider -c /dev/null --rootdir /repo --confcutdir "$sealed" \\
  --junitxml "${REPORT_DIR:-/tmp}/junit.xml" "$sealed"
"""


def make_patch(start: Path, changes: dict[str, str | bytes]) -> str:
    """A `git diff --binary` of the start with `changes` written over it (path -> text or bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "r"
        shutil.copytree(start, repo)
        env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"],
               "HOME": tmp}

        def git(*args):
            return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env).stdout

        git("init", "-q")
        git("add", "-A")
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
        for rel, content in changes.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                (repo / rel).write_bytes(content)
            else:
                (repo / rel).write_text(content)
        git("add", "-A")
        return git("diff", "--cached", "--binary").decode()


def _results(path):
    return {r["trajectory_id"]: r for r in map(json.loads, path.read_text().splitlines())}


# --- Wrong rewards ---------------------------------------------------------------------------------------------

@needs_bwrap
def test_forged_rewards_are_failed_by_tasks_run_on_the_example(tmp_path):
    attempts = tmp_path / "attempts" / "task-0417"
    attempts.mkdir(parents=True)
    (attempts / "planted-pytest.patch").write_text(make_patch(START_0417, {"pytest.py": FORGE}))
    (attempts / "planted-sitecustomize.patch").write_text(make_patch(START_0417, {"sitecustomize.py": FORGE}))
    (attempts / "atexit-forge.patch").write_text(make_patch(START_0417, {
        "invoicekit/_forge.py": ATEXIT_FORGE, "invoicekit/__init__.py": "from invoicekit import _forge  # noqa\n"}))
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", EXAMPLE, "--attempts", tmp_path / "attempts", "--timeout", TIMEOUT,
                  "--output", out)
    assert done.returncode == 0, done.stderr
    results = _results(out)
    for planted in ("task-0417/planted-pytest", "task-0417/planted-sitecustomize"):
        assert results[planted]["status"] == "failed", planted
        assert results[planted]["fail_to_pass"] == {"passed": 0, "total": 2}, planted   # pytest ran, not the forge
    forged = results["task-0417/atexit-forge"]
    # The result channel gives what the tests did (2 of 4 passed), whatever the rewritten report says; a run
    # caught rewriting its report earns nothing.
    assert forged["status"] == "failed" and forged["score"] == 0.0
    assert forged["fail_to_pass"] == {"passed": 0, "total": 2}
    assert "report was rewritten after the run" in forged["message"]


def test_the_runner_summary_is_read_from_the_whole_output_not_the_tail():
    """A summary split across writes, coloured, then buried under more output than the tail keeps."""
    from rubrics.delivery.sandbox.process import run_bounded

    script = ("printf '\\033[31m\\033[1m2 fai'; sleep 0.1; printf 'led\\033[0m, 2 passed in 0.03s\\n'; "
              "head -c 100000 /dev/zero | tr '\\0' x; printf '\\n4 passed in 0.01s\\n'")
    outcome = run_bounded(lambda _fd: ["sh", "-c", script], 30, 4000)
    assert "failed" not in outcome.log_tail
    assert outcome.summaries == [{"failed": 2, "passed": 2}, {"passed": 4}]


@needs_bwrap
def test_the_sandbox_keeps_a_planted_pytest_out_of_an_old_style_grader(tmp_path):
    """PYTHONSAFEPATH in the sandbox: even `python -m pytest` run from /repo does not import /repo/pytest.py."""
    root = tmp_path / "delivery"
    shutil.copytree(EXAMPLE / "tasks" / "task-0417", root / "tasks" / "task-0417")
    (root / "tasks" / "task-0417" / "grade.sh").write_text(OLD_GRADE)
    attempts = tmp_path / "attempts" / "task-0417"
    attempts.mkdir(parents=True)
    (attempts / "planted.patch").write_text(make_patch(START_0417, {"pytest.py": FORGE}))
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", root, "--attempts", tmp_path / "attempts", "--timeout", TIMEOUT, "--output", out)
    assert done.returncode == 0, done.stderr
    planted = _results(out)["task-0417/planted"]
    assert planted["status"] == "failed" and planted["fail_to_pass"]["passed"] == 0


@needs_bwrap
def test_validate_flags_a_grader_the_workspace_can_shadow(tmp_path):
    root = tmp_path / "delivery"
    for task in ("task-0417", "task-0418"):
        shutil.copytree(EXAMPLE / "tasks" / task, root / "tasks" / task)
    # task-0418's grader puts the working folder back on sys.path: a planted pytest.py runs instead of pytest.
    shadowable = OLD_GRADE.replace("cd /repo\n", "cd /repo\nunset PYTHONSAFEPATH\n")
    (root / "tasks" / "task-0418" / "grade.sh").write_text(shadowable)
    done = rubric("tasks", "validate", root, "--jobs", "2", "--timeout", TIMEOUT)
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = {t["task_id"]: t for t in json.loads((root / "validation.json").read_text())["tasks"]}
    assert verdicts["task-0417"]["verdict"] == "valid"
    assert verdicts["task-0418"]["verdict"] == "invalid"
    [reason] = verdicts["task-0418"]["reasons"]
    assert reason.startswith("grade.sh can be shadowed from the workspace") and "test_fail_to_pass_1 passed" in reason
    assert "can be shadowed" in done.stdout


def test_the_example_graders_show_the_safe_form():
    for grade in sorted((EXAMPLE / "tasks").glob("*/grade.sh")):
        text = grade.read_text()
        if "pytest" in text:
            assert "python -I -B -m pytest" in text and "-o pythonpath=/repo" in text, grade
            assert "python -m pytest" not in text, grade


# --- The host, flooded: patches ----------------------------------------------------------------------------------

def _deflate_zeros(size: int) -> bytes:
    squeeze = zlib.compressobj(9)
    block = bytes(2**20)
    parts = [squeeze.compress(block) for _ in range(size // 2**20)]
    return b"".join(parts) + squeeze.flush()


def _base85_lines(data: bytes) -> str:
    """git's binary-patch encoding: 52-byte groups, a length letter, base85 with git's alphabet."""
    import base64

    lines = []
    for i in range(0, len(data), 52):
        chunk = data[i:i + 52]
        letter = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        encoded = base64.b85encode(chunk, pad=True).decode()
        lines.append(letter + encoded)
    return "\n".join(lines)


def _binary_patch(name: str, declared: int, deflated: bytes) -> str:
    return (f"diff --git a/{name} b/{name}\nnew file mode 100644\nindex 0000000..1111111\n"
            f"GIT binary patch\nliteral {declared}\n{_base85_lines(deflated)}\n\nliteral 0\nHcmV?d00001\n\n")


def test_a_binary_patch_bomb_is_refused_before_it_inflates(tmp_path):
    start = START_0417
    bomb = tmp_path / "bomb.patch"
    bomb.write_text(_binary_patch("blob.bin", 300 * 2**20, _deflate_zeros(300 * 2**20)))
    assert bomb.stat().st_size < 2**20            # a few hundred KB that would write 300 MiB
    with pytest.raises(WorkspaceError, match=r"bomb.patch:5: binary hunks declare more than 256 MiB"):
        build_workspace(AttemptRef("t", "bomb", "patch", bomb), start, tmp_path / "ws")
    assert not (tmp_path / "ws" / "blob.bin").exists()


def test_a_binary_hunk_that_lies_about_its_size_is_stopped_by_git(tmp_path):
    liar = tmp_path / "liar.patch"
    liar.write_text(_binary_patch("blob.bin", 100, _deflate_zeros(8 * 2**20)))   # declares 100 bytes, holds 8 MiB
    with pytest.raises(WorkspaceError, match="does not apply"):
        build_workspace(AttemptRef("t", "liar", "patch", liar), START_0417, tmp_path / "ws")


def test_an_honest_binary_patch_still_applies(tmp_path):
    data = bytes(range(256)) * 64
    patch = tmp_path / "ok.patch"
    patch.write_text(make_patch(START_0417, {"data/blob.bin": data}))
    assert "GIT binary patch" in patch.read_text()
    build_workspace(AttemptRef("t", "ok", "patch", patch), START_0417, tmp_path / "ws")
    assert (tmp_path / "ws" / "data" / "blob.bin").read_bytes() == data


def test_a_patch_creating_more_files_than_the_workspace_holds_is_refused(tmp_path):
    many = "".join(f"diff --git a/f/{i}.txt b/f/{i}.txt\nnew file mode 100644\n--- /dev/null\n+++ b/f/{i}.txt\n"
                   f"@@ -0,0 +1 @@\n+{i}\n" for i in range(25_000))
    patch = tmp_path / "many.patch"
    patch.write_text(many)
    with pytest.raises(WorkspaceError, match="touches 25000 files, more than the workspace limit of 20000"):
        build_workspace(AttemptRef("t", "many", "patch", patch), START_0417, tmp_path / "ws")


def test_the_workspace_limits_are_checked_after_git_apply(tmp_path, monkeypatch):
    """What the patch declares can be within bounds while the workspace it makes is not: checked on the result."""
    start = tmp_path / "start"
    for i in range(20):
        (start / f"s{i}.txt").parent.mkdir(parents=True, exist_ok=True)
        (start / f"s{i}.txt").write_text("x\n")
    patch = tmp_path / "more.patch"
    patch.write_text(make_patch(start, {f"new/{i}.txt": f"{i}\n" for i in range(15)}))
    monkeypatch.setattr(workspace, "FILE_LIMIT", 30)
    with pytest.raises(WorkspaceError, match="more.patch: the workspace it makes has more than 30 files"):
        build_workspace(AttemptRef("t", "more", "patch", patch), start, tmp_path / "ws")
    big = tmp_path / "big.patch"
    big.write_text(make_patch(start, {"big1.txt": "y" * 300_000 + "\n", "big2.txt": "z" * 300_000 + "\n"}))
    monkeypatch.setattr(workspace, "FILE_LIMIT", 20_000)
    monkeypatch.setattr(workspace, "BYTE_LIMIT", 2**19)
    with pytest.raises(WorkspaceError, match="big.patch: the workspace it makes is larger than 0.5 MiB"):
        build_workspace(AttemptRef("t", "big", "patch", big), start, tmp_path / "ws2")
    huge = tmp_path / "huge.patch"     # one file over the limit: git itself is stopped (RLIMIT_FSIZE)
    huge.write_text(make_patch(start, {"huge.txt": "y" * 2**20 + "\n"}))
    with pytest.raises(WorkspaceError, match=r"huge.patch: git apply was stopped by its limits .*0.5 MiB per file"):
        build_workspace(AttemptRef("t", "huge", "patch", huge), start, tmp_path / "ws3")


_PATCH_LINES = st.sampled_from([
    "diff --git a/x b/x", "new file mode 100644", "index 0000000..1111111", "GIT binary patch", "literal 12",
    "literal 999999999999", "delta 5", "delta 99999999999999999999999", "literal", "zcmV?d00001", "HcmV?d00001",
    "--- /dev/null", "+++ b/x", "@@ -0,0 +1 @@", "+x", "", "\r",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(_PATCH_LINES, st.text(max_size=30)), max_size=30))
def test_fuzzed_binary_patches_apply_or_are_refused_by_name(tmp_path, lines):
    patch = tmp_path / "fuzz.patch"
    patch.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass") + b"\n")
    ws = Path(tempfile.mkdtemp(dir=tmp_path))
    shutil.rmtree(ws)
    try:
        build_workspace(AttemptRef("t", "fuzz", "patch", patch), START_0417, ws)
    except WorkspaceError as exc:
        assert str(exc).startswith(str(patch))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


# --- The host, flooded: reports ----------------------------------------------------------------------------------

def test_report_files_are_read_within_count_size_depth_and_time(tmp_path):
    good = ('<testsuites><testsuite name="pytest"><testcase classname="test_x" name="test_ok"/>'
            '</testsuite></testsuites>')
    (tmp_path / "a-junit.xml").write_text(good)
    deep = b"<a>" * (5 * 2**20 // 3 - 16)
    for i in range(40):
        (tmp_path / f"flood-{i:02d}.xml").write_bytes(deep)
    report = read_reports(tmp_path)
    assert [(c.name, c.status) for c in report.cases] == [("test_ok", "passed")]
    assert report.problems[0] == f"41 report files; only the first {junit.FILE_LIMIT} are read"
    assert f"flood-00.xml: elements nested more than {junit.DEPTH_LIMIT} deep, not read" in report.problems
    assert any(p.endswith(f"over the {junit.TOTAL_LIMIT // 2**20} MiB all reports may hold together, not read")
               for p in report.problems)
    # every file past the count limit is left unread: no problem line names it
    assert not any(p.startswith(f"flood-{junit.FILE_LIMIT:02d}.xml") for p in report.problems)


def test_report_parsing_stops_at_its_cpu_deadline(tmp_path, monkeypatch):
    (tmp_path / "a.xml").write_text("<testsuites>" + "<testsuite/>" * 20_000 + "</testsuites>")
    monkeypatch.setattr(junit, "PARSE_LIMIT_S", -1.0)    # already past it: the first chunk parsed is the last
    report = read_reports(tmp_path)
    assert report.cases == [] and report.problems == ["a.xml: reading the reports took over -1s of CPU, "
                                                      "the rest not read"]


def test_a_folder_of_many_entries_is_not_listed_to_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(junit, "ENTRY_LIMIT", 5)
    for i in range(8):
        (tmp_path / f"n{i}.txt").write_text("")
    assert read_reports(tmp_path).problems == ["more than 5 entries in the report folder; the rest are not looked at"]


# --- The host, flooded: the sandbox's own caps ---------------------------------------------------------------------

def _task(tmp_path: Path, grade: str, files: dict[str, str]) -> Path:
    folder = tmp_path / "task"
    (folder / "repo").mkdir(parents=True)
    (folder / "repo" / "README").write_text("start\n")
    for name, text in files.items():
        (folder / "repo" / name).write_text(text)
    (folder / "tests").mkdir()
    (folder / "tests" / "test_fail_to_pass.py").write_text("def test_a():\n    pass\n")
    (folder / "grade.sh").write_text("#!/usr/bin/env bash\n" + grade)
    (folder / "grade.sh").chmod(0o755)
    return folder


def _grade(tmp_path: Path, grade: str, files: dict[str, str] | None = None, **limits):
    folder = _task(tmp_path, grade, files or {})
    chosen = SandboxLimits(wall_s=60, **limits)
    task = graded_task("task-cap", folder, "bwrap", chosen)
    work_root = tmp_path / "work"
    work_root.mkdir()
    return grade_attempt(task, None, "start", "start", BwrapSandbox(), chosen, work_root, 0)


@needs_bwrap
def test_nested_user_namespaces_are_refused_inside_the_sandbox(tmp_path):
    result = _grade(tmp_path, "unshare -Ur true && echo NESTED-USERNS-MADE\n"
                              "unshare -U true && echo NESTED-USERNS-MADE\n"
                              "exit 0\n")
    assert "NESTED-USERNS-MADE" not in result.log_tail, result.log_tail
    assert "unshare failed" in result.log_tail


def test_docker_sizes_tmp_too(tmp_path):
    from rubrics.delivery.sandbox.base import SandboxRequest
    from rubrics.delivery.sandbox.docker import docker_run_arguments

    request = SandboxRequest("t", tmp_path, tmp_path, tmp_path, tmp_path, 0)
    argv = docker_run_arguments("docker", "img", "n", request, SandboxLimits(tmp_mb=32), tmp_path)
    assert argv[argv.index("--tmpfs") + 1] == "/tmp:rw,exec,size=32m"
    assert "PYTHONSAFEPATH=1" in argv


def test_unprivileged_bwrap_is_told_to_disable_user_namespaces(tmp_path):
    from rubrics.delivery.sandbox.base import SandboxRequest

    request = SandboxRequest("t", tmp_path, tmp_path, tmp_path, tmp_path, 0)
    args = bwrap_arguments(request, privileged=False, limits=SandboxLimits(tmp_mb=32), seccomp_fd=7)
    assert args[args.index("--unshare-user") + 1] == "--disable-userns"
    assert args[args.index("--seccomp") + 1] == "7"
    assert args[args.index("--tmpfs", args.index("--size")) + 1] == "/tmp"
    assert args[args.index("--size") + 1] == str(32 * 2**20)


@needs_bwrap
def test_tmp_is_a_tmpfs_of_bounded_size(tmp_path):
    result = _grade(tmp_path, "head -c 40M /dev/zero > /tmp/fill; echo \"tmp-size $(stat -c %s /tmp/fill)\"\n"
                              "exit 1\n", tmp_mb=16)
    [line] = [ln for ln in result.log_tail.splitlines() if ln.startswith("tmp-size ")]
    assert int(line.split()[1]) <= 16 * 2**20
    assert "No space left on device" in result.log_tail


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="the workspace quota is a tmpfs the host mounts: root only "
                                              "(unprivileged, each file is capped at --file-mb, not their sum)")
def test_the_workspace_and_report_folder_share_a_disk_quota(tmp_path):
    grade = "".join(f"head -c 30M /dev/zero > {where}/fill; echo \"{name} $(stat -c %s {where}/fill)\"\n"
                    for name, where in (("repo", "/repo"), ("report", "/report"), ("repo2", "/repo/x")))
    result = _grade(tmp_path, "mkdir -p /repo/x\n" + grade + "exit 1\n", disk_mb=48)
    sizes = {ln.split()[0]: int(ln.split()[1]) for ln in result.log_tail.splitlines()
             if ln.split()[:1] and ln.split()[0] in ("repo", "report", "repo2")}
    assert set(sizes) == {"repo", "report", "repo2"}, result.log_tail
    assert sum(sizes.values()) <= 48 * 2**20
    assert "No space left on device" in result.log_tail


# Six children of 60 MiB each, every one within the 200 MiB per-process limit, held at once: each says it is
# ready once its memory is written and waits for the parent, who lets them go once each is ready or gone.
_SPREAD = ("import os, select\n"
           "ready_r, ready_w = os.pipe()\n"
           "go_r, go_w = os.pipe()\n"
           "kids = []\n"
           "for _ in range(6):\n"
           "    pid = os.fork()\n"
           "    if pid == 0:\n"
           "        os.close(ready_r); os.close(go_w)\n"
           "        block = b'\\x01' * (60 * 2**20)\n"
           "        os.write(ready_w, b'r')\n"
           "        os.read(go_r, 1)\n"
           "        os._exit(0)\n"
           "    kids.append(pid)\n"
           "os.close(ready_w)\n"
           "ready, codes = 0, {}\n"
           "while ready + len(codes) < 6:\n"
           "    if select.select([ready_r], [], [], 0.1)[0]:\n"
           "        ready += len(os.read(ready_r, 6))\n"
           "    for k in kids:\n"
           "        if k not in codes and os.waitpid(k, os.WNOHANG)[0]:\n"
           "            codes[k] = 'killed'\n"
           "os.close(go_w)\n"
           "for k in kids:\n"
           "    if k not in codes:\n"
           "        codes[k] = os.waitpid(k, 0)[1]\n"
           "print('children', sorted(map(str, codes.values())))\n")


@needs_bwrap
@pytest.mark.skipif(not cgroups_available(), reason="no cgroup can be made here (neither root nor a "
                                                              "delegated subtree): the per-process fallback applies")
def test_memory_spread_over_many_processes_is_capped_as_a_whole(tmp_path):
    result = _grade(tmp_path, "python3 /repo/spread.py\nexit 0\n", {"spread.py": _SPREAD}, memory_mb=200)
    assert result.status == "memory", (result.status, result.message, result.log_tail)
    assert "200 MiB memory cap" in result.message
    assert result.score == 0.0


def test_cgroups_left_behind_are_none(tmp_path):
    cap = TreeCap.make(64 * 2**20)
    if cap is None:
        pytest.skip("no cgroup can be made here")
    ours = f"rubric-grade-{os.getpid()}-*"     # this process's own, whatever else runs on the machine
    assert [p.name for p in cap.path.parent.glob(ours)] == [cap.path.name]   # the skipif's probe left none
    child = subprocess.Popen([sys.executable, "-I", "-S", "-c",
                              "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); print('in', "
                              "flush=True); time.sleep(60)", str(cap.procs_file)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "in\n"
    assert cap._pids() == [child.pid]
    cap.close()
    assert child.wait(timeout=30) == -9
    assert not cap.path.exists()
    assert cgroups_available() and list(cap.path.parent.glob(ours)) == []


# --- A patch that reads a host file (issue 37) ----------------------------------------------------------------

def _copy_patch(source: str, target: str = "invoicekit/stolen.txt", verb: str = "copy") -> str:
    return (f"diff --git a/{source} b/{target}\nsimilarity index 100%\n{verb} from {source}\n{verb} to {target}\n")


@pytest.mark.parametrize("source", ["../../../../../../../../etc/hostname", "/etc/hostname", "invoicekit/../../x",
                                    '"..\\057..\\057..\\057..\\057..\\057..\\057etc\\057hostname"'])
@pytest.mark.parametrize("verb", ["copy", "rename"])
def test_a_patch_whose_copy_or_rename_source_leaves_the_workspace_is_refused(tmp_path, source, verb):
    patch = tmp_path / "steal.patch"
    patch.write_text(_copy_patch(source, verb=verb))
    with pytest.raises(WorkspaceError, match=rf"steal.patch:3: {verb} from .* reads outside the workspace"):
        build_workspace(AttemptRef("t", "steal", "patch", patch), START_0417, tmp_path / "ws")
    assert not (tmp_path / "ws" / "invoicekit" / "stolen.txt").exists()


def test_a_patch_copying_through_a_link_it_planted_earlier_is_refused(tmp_path):
    start = tmp_path / "start"
    shutil.copytree(START_0417, start)
    os.symlink("/etc", start / "hostdir")     # a link already in the starting state, or left by a snapshot
    patch = tmp_path / "link.patch"
    patch.write_text(_copy_patch("hostdir/hostname"))
    with pytest.raises(WorkspaceError, match=r"reads through the link 'hostdir'"):
        build_workspace(AttemptRef("t", "link", "patch", patch), start, tmp_path / "ws")


def test_a_copy_inside_the_workspace_still_applies(tmp_path):
    patch = tmp_path / "copy.patch"
    patch.write_text(_copy_patch("invoicekit/totals.py", "invoicekit/totals_copy.py"))
    build_workspace(AttemptRef("t", "copy", "patch", patch), START_0417, tmp_path / "ws")
    assert (tmp_path / "ws" / "invoicekit" / "totals_copy.py").read_text() == \
        (START_0417 / "invoicekit" / "totals.py").read_text()


@needs_bwrap
def test_tasks_run_gives_a_copy_from_patch_an_error_with_the_reason(tmp_path):
    attempts = tmp_path / "attempts" / "task-0417"
    attempts.mkdir(parents=True)
    (attempts / "steal.patch").write_text(_copy_patch("../../../../../../../../etc/hostname"))
    out = tmp_path / "results.jsonl"
    done = rubric("tasks", "run", EXAMPLE, "--attempts", tmp_path / "attempts", "--timeout", TIMEOUT, "--output", out)
    result = _results(out)["task-0417/steal"]
    assert result["status"] == "bad-attempt" and result["score"] == 0.0, done.stderr   # an attempt that is not gradable
    assert "reads outside the workspace" in result["message"]
    assert open("/etc/hostname").read().strip() not in out.read_text()
