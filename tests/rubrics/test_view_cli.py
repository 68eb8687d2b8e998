"""`rubric view` without a browser: reading results (bad lines by number), the compare figures, the evidence marks,
the page's escaping, `rubric judge-eval --json`, and the command's errors, through the real CLI in a subprocess."""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from view_support import EXAMPLE, REPO, example_runs, read_results, rubric  # noqa: F401 - example_runs is a fixture

from rubrics.delivery.pass_rates.intervals import bootstrap_difference
from rubrics.delivery.report.uplift import RESAMPLES, SEED
from rubrics.result import Result
from rubrics.view.compare import compare_runs
from rubrics.view.evidence_marks import mark, needles
from rubrics.view.results_file import load_results
from rubrics.view.trajectories import lay_out
from rubrics.trajectory import load_trajectory


def page_data(html_text: str) -> dict:
    """The JSON the page carries, read back the way the page's script reads it."""
    match = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', html_text, re.S)
    assert match, "no data element in the page"
    return json.loads(match.group(1))


def test_bad_lines_are_reported_with_their_line_numbers_and_the_rest_is_kept(tmp_path, example_runs):
    good = example_runs.a.read_bytes().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b"\n".join([good[0], b"{not json", b'{"trajectory_id": "x"}', b"", b"\xff\xfe bytes",
                                  good[1], b"[1, 2]"]) + b"\n")
    loaded = load_results(mixed)
    assert [r.trajectory_id for r in loaded.results] == [json.loads(good[0])["trajectory_id"],
                                                        json.loads(good[1])["trajectory_id"]]
    assert loaded.lines == [1, 6]
    assert [p.line for p in loaded.problems] == [2, 3, 5, 7]
    assert "not a result" in loaded.problems[1].message and "UTF-8" in loaded.problems[2].message

    out = tmp_path / "mixed.html"
    done = rubric("view", str(mixed), "--static", str(out))
    assert all(f"mixed.jsonl:{n}:" in done.stderr for n in (2, 3, 5, 7))
    data = page_data(out.read_text(encoding="utf-8"))
    assert [p["line"] for p in data["problems"]] == [2, 3, 5, 7] and len(data["run"]["rows"]) == 2


def test_the_json_array_of_grade_format_json_opens_with_line_numbers(tmp_path):
    array = tmp_path / "results.json"
    rubric("grade", str(EXAMPLE / "rubric.yaml"), str(EXAMPLE / "trajectories"), "--judge", "none", "--format",
           "json", "--output", str(array), check=False)   # rc 1: --judge none leaves the results incomplete
    loaded = load_results(array)
    assert len(loaded.results) == 8 and not loaded.problems
    text = array.read_text(encoding="utf-8").splitlines()
    for line, result in zip(loaded.lines, loaded.results):
        assert text[line - 1].strip() == "{" and result.trajectory_id in text[line]


def test_compare_counts_flips_and_gives_the_uplift_bootstrap_interval(example_runs):
    a = [Result.model_validate(r) for r in read_results(example_runs.a)]
    b = [Result.model_validate(r) for r in read_results(example_runs.b)]
    comparison = compare_runs(a, b, "a", "b")
    diffs = [rb.score - ra.score for ra, rb in zip(a, b)]
    s = comparison.summary
    assert (s.paired, s.improved, s.regressed) == (8, sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs))
    assert s.mean_difference == statistics.fmean(diffs)
    # The interval is the uplift report's: same function, seed and resamples, trajectories as one-attempt tasks.
    expected = bootstrap_difference([[r.score] for r in a], [[r.score] for r in b],
                                    lambda runs: statistics.fmean(x[0] for x in runs), RESAMPLES, SEED)
    assert (s.low, s.high) == expected and s.low <= s.mean_difference <= s.high
    for pair, ra, rb in zip(comparison.pairs, a, b):
        status_b = {i.id: i.status for i in rb.items}
        assert [(f.item_id, f.before, f.after) for f in pair.flipped] == [
            (i.id, i.status, status_b[i.id]) for i in ra.items if i.status != status_b[i.id]]


def test_compare_pairs_by_trajectory_and_lists_the_unpaired(example_runs):
    a = [Result.model_validate(r) for r in read_results(example_runs.a)]
    comparison = compare_runs(a[:5], a[3:], "a", "b")
    assert [p.trajectory_id for p in comparison.pairs] == [r.trajectory_id for r in a[3:5]]
    assert comparison.only_in_a == sorted(r.trajectory_id for r in a[:3])
    assert comparison.only_in_b == sorted(r.trajectory_id for r in a[5:])
    assert comparison.summary.mean_difference == 0 and comparison.summary.unchanged == 2


def test_evidence_marks_the_email_it_cites_and_the_message_it_quotes(example_runs):
    trajectory = load_trajectory(EXAMPLE / "trajectories" / "01-all-gates-pass.json")
    result = next(Result.model_validate(r) for r in read_results(example_runs.a) if r["trajectory_id"] == trajectory.id)
    view = mark(lay_out(trajectory), result)
    email = next(p for p in view.parts if p.kind == "email")
    assert "mis-to-cfo" in email.marks   # "email #1 to cfo@acme.test ..."
    answer = next(p for p in view.parts if p.kind == "final_answer")
    assert "total-spend" in answer.marks   # "found 48.2L ..."
    user = next(p for p in view.parts if p.kind == "message" and p.title == "user")
    assert "mis-to-cfo" not in user.marks  # the pattern '*MIS*' alone locates nothing
    assert needles("the judge read final_answer: met at 0.73 (threshold 0.5)") == []
    assert needles("the judge read final_answer: met at 0.73 (threshold 0.5); facts 'EXP-221' found in "
                   "final_answer") == ["EXP-221"]


def test_the_page_carries_hostile_strings_as_inert_ascii_json(tmp_path, example_runs):
    hostile = '</script><script>document.body.setAttribute("data-pwned","1")</script>\u202e<!-- &amp; \ud800'
    row = read_results(example_runs.a)[0]
    row["trajectory_id"] = hostile
    row["items"][0]["evidence"] = hostile
    path = tmp_path / "hostile.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = tmp_path / "hostile.html"
    rubric("view", str(path), "--static", str(out))
    page = out.read_text(encoding="utf-8")
    body = re.search(r'id="view-data">(.*?)</script>', page, re.S).group(1)
    assert body.isascii() and not set("<>&") & set(body)
    assert page.count("</script>") == 2   # the data element's and the script's: nothing from the data closes one
    assert page_data(page)["run"]["rows"][0]["trajectory_id"] == hostile   # a lone surrogate too, as an escape
    assert "default-src 'none'" in page


def test_judge_eval_json_has_a_row_per_label_with_the_evidence_read(example_runs):
    written = json.loads(example_runs.judge_eval.read_text(encoding="utf-8"))
    assert written["kind"] == "rubric-judge-eval" and written["labels"] == len(written["label_rows"]) == 80
    row = written["label_rows"][0]
    assert row["source"].endswith("labels.jsonl:1") and row["item_id"] == "flags-unsigned"
    assert 0 <= row["probability"] <= 1 and row["threshold"] == 0.5
    assert [e["name"] for e in row["evidence"]] and "48.2L" in row["evidence"][0]["text"]
    assert written["report"]["overall"]["n"] == 80


def test_files_that_cannot_be_read_fail_with_a_message(tmp_path):
    done = rubric("view", str(tmp_path / "missing.jsonl"), "--static", str(tmp_path / "x.html"), check=False)
    assert done.returncode == 1 and "missing.jsonl" in done.stderr and not (tmp_path / "x.html").exists()
    broken = tmp_path / "judge.json"
    broken.write_text('{"report": {"per_item": {"a": {"n": "many"}}, "overall": {}}}', encoding="utf-8")
    done = rubric("view", str(broken), "--static", str(tmp_path / "y.html"), check=False)
    assert done.returncode == 1 and "judge-eval report" in done.stderr
    done = rubric("view", str(broken), "--port", "70000", check=False)
    assert done.returncode == 2 and "--port" in done.stderr


def test_view_is_listed_in_the_cli_help():
    assert "view" in rubric("--help").stdout
    assert "--compare" in rubric("view", "--help").stdout


def opener(tmp_path: Path) -> tuple[dict, Path]:
    """A $BROWSER command (which Python's webbrowser honours) that writes the address it is asked to open."""
    opened = tmp_path / "opened.txt"
    script = tmp_path / "browser.py"
    script.write_text(f"import sys\nopen({str(opened)!r}, 'w').write(sys.argv[1])\n", encoding="utf-8")
    return {**os.environ, "BROWSER": f"{sys.executable} {script} %s", "PYTHONPATH": str(REPO)}, opened


def test_open_hands_the_static_file_to_the_browser(tmp_path, example_runs):
    env, opened = opener(tmp_path)
    out = tmp_path / "page.html"
    done = subprocess.run([sys.executable, "-m", "rubrics.cli.main", "view", str(example_runs.a), "--static", str(out),
                           "--open"], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert opened.read_text(encoding="utf-8") == out.resolve().as_uri()


def test_the_server_prints_its_address_and_open_hands_it_to_the_browser(tmp_path, example_runs):
    env, opened = opener(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "rubrics.cli.main", "view", str(example_runs.a), "--port", "0",
                                "--open"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                               cwd=REPO)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/", process.stdout.readline()).group()
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and len(page_data(page.text)["run"]["rows"]) == 8
        for _ in range(600):   # the browser command runs in the background: wait for it, up to a minute
            if opened.exists() and opened.read_text(encoding="utf-8"):
                break
            time.sleep(0.1)
        assert opened.read_text(encoding="utf-8") == url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_an_empty_results_file_is_an_empty_run(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    out = tmp_path / "empty.html"
    rubric("view", str(empty), "--static", str(out))
    data = page_data(out.read_text(encoding="utf-8"))
    assert data["run"]["rows"] == [] and data["problems"] == [] and data["run"]["usage"] is None


def test_the_server_closes_a_silent_connection_and_forbids_framing():
    import socket
    import threading
    import time

    import httpx

    from rubrics.view.server import make_server

    server = make_server(lambda: "<!doctype html><p>page</p>", 0, timeout_s=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        response = httpx.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert response.status_code == 200
        assert response.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        silent.sendall(b"GET / HTTP/1.1\r\n")   # half a request, then nothing
        started = time.monotonic()
        assert silent.recv(1024) == b""          # the server hung up
        assert time.monotonic() - started < 5
        silent.close()
    finally:
        server.shutdown()
        server.server_close()
