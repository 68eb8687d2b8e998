"""Hostile Inspect `.eval` zips, read without inspect_ai (the core and [engine] installs) and with it (a stand-in
package that reads zips the naive way): a member that lies about its size is read in bounded chunks and stops at
its declared size; a deeply nested member is a positioned error from the hardened JSON loader, never an uncaught
RecursionError; either way the log's other samples, and every other input of `rubric grade`, still load."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest
from hostile_zips import (eval_log, fake_inspect_ai, lie_about_size, lying_log, nested_log, sample,
                          stand_in_inspect_ai)
from rubric_fakes import REPO
from traced_memory import traced_peak

import rubrics.trajectory.adapters.inspect_log as inspect_log
from rubrics.trajectory import TrajectoryLoadError, iter_trajectory_file

RUBRIC = "version: 1\nid: r\ntask: t\ncriteria:\n  - {id: a, points: 1, contains: {text: '84.50'}}\n"


@pytest.fixture(params=["without inspect_ai", "with inspect_ai"])
def install(request, tmp_path, monkeypatch):
    """Each test runs on both installs: inspect_ai absent, and importable (the stand-in, which notes its calls)."""
    calls = tmp_path / "inspect-calls.txt"
    if request.param == "with inspect_ai":
        monkeypatch.setenv("FAKE_INSPECT_CALLS", str(calls))
        with stand_in_inspect_ai(tmp_path / "site"):
            assert inspect_log._inspect_installed()
            yield {"name": request.param, "calls": calls}
    else:
        monkeypatch.setattr(inspect_log, "_inspect_installed", lambda: False)
        yield {"name": request.param, "calls": calls}


def entries(path):
    return {(e.id if not isinstance(e, TrajectoryLoadError) else e.source.rsplit(": ", 1)[-1]):
            e for e in iter_trajectory_file(path)}


def test_a_member_that_lies_about_its_size_stops_at_it_in_bounded_memory(tmp_path, install):
    path = lying_log(tmp_path / "lying.eval", inflated=192 << 20)   # 192 MiB of zeros declared as 100 bytes
    found, peak = traced_peak(lambda: entries(path))
    assert peak < 32 << 20, f"peak {peak >> 20} MiB while reading a log that declares a few hundred bytes"
    assert set(found) == {"a", "z", "samples/bomb_epoch_1.json"}
    bomb = found["samples/bomb_epoch_1.json"]
    assert isinstance(bomb, TrajectoryLoadError) and "inspect-log" in str(bomb)
    assert "CRC" in str(bomb) or "declared size" in str(bomb)
    assert found["a"].final_answer == "Refunded 84.50." and found["z"].id == "z"
    if install["name"] == "with inspect_ai":   # never handed to the naive reader
        assert not install["calls"].exists()


def test_a_member_that_inflates_past_the_per_member_limit_stops_there(tmp_path, install, monkeypatch):
    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 1 << 20)
    path = lying_log(tmp_path / "lying.eval", inflated=64 << 20, declared=(1 << 20) - 1)
    found = entries(path)
    bomb = str(found["samples/bomb_epoch_1.json"])
    assert "declared size" in bomb or "CRC" in bomb
    assert {"a", "z"} <= set(found)


def test_a_deeply_nested_member_is_a_positioned_error_and_the_other_samples_load(tmp_path, install):
    found = entries(nested_log(tmp_path / "nested.eval"))
    deep = found["samples/deep_epoch_1.json"]
    assert isinstance(deep, TrajectoryLoadError)
    assert "samples/deep_epoch_1.json: line 1: column 501: nested deeper than 500 levels" in str(deep)
    assert found["a"].id == "a" and found["z"].id == "z"
    if install["name"] == "with inspect_ai":
        assert not install["calls"].exists()


def test_a_nested_header_or_a_member_of_odd_shape_costs_only_itself(tmp_path, install):
    path = eval_log(tmp_path / "odd.eval", {"samples/a_epoch_1.json": sample("a"),
                                            "samples/b_epoch_1.json": {**sample("b"), "scores": [1, 2]},
                                            "samples/c_epoch_1.json": b"\xff\xfe not utf-8"})
    found = entries(path)
    assert found["a"].id == "a"
    assert "field samples/b_epoch_1.json.scores: expected an object, got list" in str(found["samples/b_epoch_1.json"])
    assert "invalid UTF-8" in str(found["samples/c_epoch_1.json"])
    with zipfile.ZipFile(tmp_path / "deep-header.eval", "w") as archive:
        archive.writestr("header.json", "{" * 100_000)
        archive.writestr("samples/a_epoch_1.json", json.dumps(sample("a")))
    [error] = list(iter_trajectory_file(tmp_path / "deep-header.eval"))
    assert isinstance(error, TrajectoryLoadError) and "nested deeper than 500 levels" in str(error)


def test_a_good_log_still_goes_to_inspect_ai_when_it_is_installed(tmp_path, install):
    path = eval_log(tmp_path / "good.eval", {"samples/a_epoch_1.json": sample("a"),
                                             "samples/b_epoch_1.json": sample("b")})
    found = entries(path)
    assert set(found) == {"a", "b"} and found["a"].metadata["inspect"]["model"] == "mockllm/model"
    if install["name"] == "with inspect_ai":
        assert set(install["calls"].read_text().splitlines()) == {str(path)}   # its header, then its samples


def test_other_compression_methods_are_refused_per_member(tmp_path, install):
    path = tmp_path / "bz.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"task": "t", "model": "m"}}))
        archive.writestr("samples/a_epoch_1.json", json.dumps(sample("a")))
        archive.writestr("samples/b_epoch_1.json", json.dumps(sample("b")), compress_type=zipfile.ZIP_BZIP2)
    found = entries(path)
    assert found["a"].id == "a" and "compression method 12 is not read" in str(found["samples/b_epoch_1.json"])


# `rubric grade` with inspect_ai hidden even where it is installed: a meta-path finder that says it is not there
WITHOUT_INSPECT = """
import sys
class _NoInspect:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "inspect_ai" or name.startswith("inspect_ai."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
        return None
sys.meta_path.insert(0, _NoInspect)
from rubrics.cli.main import main
sys.exit(main())
"""


@pytest.mark.parametrize("with_inspect", [False, True], ids=["without inspect_ai", "with inspect_ai"])
def test_rubric_grade_keeps_every_other_input_after_a_nested_and_a_lying_zip(tmp_path, with_inspect):
    nested = nested_log(tmp_path / "nested.eval")
    lying = lying_log(tmp_path / "lying.eval", inflated=64 << 20)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"id": "good", "messages": [{"role": "user", "content": "x"},
                                                          {"role": "assistant", "content": "Refunded 84.50."}]}))
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(RUBRIC)
    env = dict(os.environ)
    if with_inspect:
        env["PYTHONPATH"] = os.pathsep.join([str(fake_inspect_ai(tmp_path / "site")), env.get("PYTHONPATH", "")])
        env["FAKE_INSPECT_CALLS"] = str(tmp_path / "calls.txt")
        command = [sys.executable, "-m", "rubrics.cli.main"]
    else:
        command = [sys.executable, "-c", WITHOUT_INSPECT]
    done = subprocess.run([*command, "grade", str(rubric), str(nested), str(lying), str(good), "--format", "jsonl"],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done.stderr
    graded = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["trajectory_id"] for r in graded) == ["a", "a", "good", "z", "z"], done.stderr
    assert "nested deeper than 500 levels" in done.stderr and "samples/bomb_epoch_1.json" in done.stderr
    assert not (tmp_path / "calls.txt").exists()


def test_lie_about_size_rewrites_both_headers(tmp_path):
    path = eval_log(tmp_path / "x.eval", {"samples/x_epoch_1.json": "0" * 5000})
    lie_about_size(path, "samples/x_epoch_1.json", 7)
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("samples/x_epoch_1.json").file_size == 7
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            archive.read("samples/x_epoch_1.json")


def test_an_honest_compression_bomb_is_refused_before_anything_inflates(tmp_path, install):
    """Members that declare their true size (no lie for the chunked reader to catch), 200 MiB of zeros from a
    file of a few hundred KB: refused by the inflation ratio, in bounded memory, naming the file."""
    path = tmp_path / "bomb.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("header.json", json.dumps({"eval": {"task": "t", "model": "m"}}))
        for number in range(4):
            archive.writestr(f"samples/s{number}_epoch_1.json",
                             b'{"id": "s%d", "messages": [], "pad": "' % number + b"0" * (50 << 20) + b'"}')
    assert path.stat().st_size < 1 << 20
    [error], peak = traced_peak(lambda: list(iter_trajectory_file(path)))
    assert isinstance(error, TrajectoryLoadError) and "a compression bomb, not read" in str(error)
    assert "times the" in str(error) and "bomb.eval" in str(error)
    assert peak < 16 << 20
    if install["name"] == "with inspect_ai":
        assert not install["calls"].exists()

