"""`rubric view` in a real browser: Debian's headless chromium loads the page the real CLI wrote (from file://) or
served (from 127.0.0.1), and the tests assert on its DOM: the run page, filtering, a trajectory, two runs compared,
a judge evaluation, hostile text that must not run, and 1,000 generated results.

Interaction goes through the DevTools protocol (typing into the filters, clicking); page states that a URL names
(the page keeps its filters in the fragment) are also read with --dump-dom. Screenshots and the filter times are
kept in the artifacts folder ($RUBRIC_VIEW_ARTIFACTS, else a pytest temporary folder) and logged; with
RUBRIC_VIEW_WRITE_DOCS=1 the run-page screenshot also replaces docs/view.png.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from devtools import Browser
from view_support import (ATTACKS, CHROMIUM, CHROMIUM_FLAGS, HOSTILE_TEXT, PWNED, REPO, TEN_MB, dump_dom,
                          example_runs, generated_results, needs_chromium, read_results, rubric, screenshot)

pytestmark = [needs_chromium, pytest.mark.slow]   # a browser per test: seconds each
_ = example_runs   # a fixture, used by name

VISIBLE_ROWS = "Array.from(document.querySelectorAll('#runs tbody tr:not([hidden])')).map(tr => tr.dataset.index)"


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("RUBRIC_VIEW_ARTIFACTS") or tmp_path_factory.mktemp("view-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def log(artifacts: Path, line: str) -> None:
    print(line)
    with open(artifacts / "view-browser.log", "a", encoding="utf-8") as out:
        out.write(line + "\n")


@pytest.fixture(scope="module")
def example_page(example_runs, tmp_path_factory) -> Path:
    """Made in a folder of its own with relative names, as a user would: the page shows the names it was given."""
    folder = tmp_path_factory.mktemp("page")
    shutil.copytree(example_runs.trajectories, folder / "trajectories")
    for run in (example_runs.a, example_runs.b):
        shutil.copyfile(run, folder / run.name)
    rubric("view", example_runs.a.name, "--compare", example_runs.b.name, "--trajectories", "trajectories",
           "--rubric", str(example_runs.rubric), "--price-per-mtok", "0.15,0.60", "--static", "example.html",
           cwd=folder)
    return folder / "example.html"


@pytest.fixture
def browser(tmp_path):
    with Browser(CHROMIUM, CHROMIUM_FLAGS, tmp_path / "profile") as page:
        yield page


def rows_of(dom, table_id: str) -> list:
    return dom.find("table", id=table_id).find("tbody").find_all("tr")


def test_the_run_page_shows_every_result_with_its_figures(example_runs, example_page, tmp_path):
    results = read_results(example_runs.a)
    dom = dump_dom(example_page.as_uri() + "#run", tmp_path / "profile")
    body = dom.find("body")
    assert body.attrs["data-ready"] == "1" and body.attrs["data-view"] == "run" and "data-js-error" not in body.attrs
    rows = rows_of(dom, "runs")
    assert [r.find("a").text() for r in rows] == [r["trajectory_id"] for r in results]
    for row, result in zip(rows, results):
        cells = row.find_all("td")
        assert abs(float(cells[3].text()) - result["score"]) <= 0.0005 + 1e-12   # shown to 3 places
        assert cells[6].text() == {True: "passed", False: "failed", None: "errored"}[result["gates_passed"]]
        assert cells[7].text() == str(result["uncertain_items"])
    bars = dom.find("div", id="histogram").find_all("div")
    assert sum(int(b.attrs["data-count"]) for b in bars if "data-count" in b.attrs) == len(results)
    rates = {r.find_all("td")[0].text(): r.find_all("td")[3].text() for r in rows_of(dom, "item-rates")}
    assert rates["mis-to-cfo"] == str(sum(i["id"] == "mis-to-cfo" and i["status"] == "met"
                                           for r in results for i in r["items"]))
    usage = dom.find("div", id="usage").text()
    prompt = sum(r["judge_usage"]["prompt_tokens"] for r in results)
    assert f"{prompt:,} prompt tokens" in usage and "cost" in usage


@pytest.mark.parametrize("fragment, keep", [
    ("gate=failed", lambda r: r["gates_passed"] is False),
    ("uncertain=yes", lambda r: r["uncertain_items"] > 0),
    ("item=compares-q2&status=unmet", lambda r: any(i["id"] == "compares-q2" and i["status"] == "unmet"
                                                    for i in r["items"])),
    ("min=0.1&max=0.6", lambda r: 0.1 <= r["score"] <= 0.6),
    ("q=TOLERANCE", lambda r: "tolerance" in r["trajectory_id"]),
])
def test_filters_named_by_the_url_show_the_matching_rows(example_runs, example_page, tmp_path, fragment, keep):
    results = read_results(example_runs.a)
    dom = dump_dom(example_page.as_uri() + "#run?" + fragment, tmp_path / "profile")
    shown = [r.find("a").text() for r in rows_of(dom, "runs") if "hidden" not in r.attrs]
    assert shown == [r["trajectory_id"] for r in results if keep(r)]
    assert dom.find("span", id="shown-count").text() == f"{len(shown)} of {len(results)} shown"


def test_typing_selecting_and_sorting_filter_the_table(example_runs, example_page, browser):
    results = read_results(example_runs.a)
    browser.open(example_page.as_uri())
    assert len(browser.evaluate(VISIBLE_ROWS)) == len(results)
    browser.evaluate("""(() => { const q = document.querySelector('input[name=q]'); q.value = 'tolerance';
                         q.dispatchEvent(new Event('input', {bubbles: true})); })()""")
    shown = browser.evaluate(VISIBLE_ROWS)
    assert [results[int(i)]["trajectory_id"] for i in shown] == [r["trajectory_id"] for r in results
                                                                  if "tolerance" in r["trajectory_id"]]
    assert browser.evaluate("location.hash") == "#run?q=tolerance"
    browser.evaluate("""(() => { const q = document.querySelector('input[name=q]'); q.value = '';
                         q.dispatchEvent(new Event('input', {bubbles: true}));
                         const g = document.querySelector('select[name=gate]'); g.value = 'passed';
                         g.dispatchEvent(new Event('change', {bubbles: true})); })()""")
    passed = [i for i, r in enumerate(results) if r["gates_passed"] is True]
    assert sorted(int(i) for i in browser.evaluate(VISIBLE_ROWS)) == passed
    browser.evaluate("document.querySelector('th[data-key=score]').click()")
    browser.evaluate("document.querySelector('th[data-key=score]').click()")   # twice: descending
    order = [results[int(i)]["score"] for i in browser.evaluate(VISIBLE_ROWS)]
    assert order == sorted((results[i]["score"] for i in passed), reverse=True)
    assert browser.evaluate("location.hash") == "#run?gate=passed&sort=score&dir=desc"


def test_opening_a_trajectory_shows_items_probabilities_evidence_and_marked_parts(example_runs, example_page,
                                                                                   browser):
    results = read_results(example_runs.a)
    index = next(i for i, r in enumerate(results) if r["trajectory_id"] == "all-gates-pass")
    browser.open(example_page.as_uri() + "#run?q=all-gates")
    browser.evaluate("document.querySelector('#runs tbody tr:not([hidden]) a').click()")
    browser.wait_for("document.body.dataset.view === 'trajectory' && document.body.dataset.ready === '1'")
    assert browser.evaluate("location.hash") == f"#t={index}"
    result = results[index]
    items = browser.evaluate("""Array.from(document.querySelectorAll('#items tbody tr')).map(tr => ({
        id: tr.dataset.item, status: tr.children[1].firstChild.dataset.status, bar: !!tr.querySelector('.prob'),
        threshold: !!tr.querySelector('.prob .threshold'), band: !!tr.querySelector('.prob .band'),
        evidence: tr.children[4].textContent}))""")
    assert [i["id"] for i in items] == [i["id"] for i in result["items"]]
    for shown, item in zip(items, result["items"]):
        assert shown["status"] == item["status"] and item["evidence"] in shown["evidence"]
        judged = item["probability"] is not None
        assert shown["bar"] == shown["threshold"] == shown["band"] == judged
    parts = browser.evaluate("""Array.from(document.querySelectorAll('#trajectory .part')).map(p => ({
        kind: p.dataset.kind, title: p.querySelector('h3').textContent, marked: p.classList.contains('marked'),
        marks: (p.querySelector('.marks') || {}).textContent || ''}))""")
    kinds = {p["kind"] for p in parts}
    assert {"message", "tool_call", "tool_result", "final_answer", "email"} <= kinds
    email = next(p for p in parts if p["kind"] == "email")
    assert email["marked"] and "mis-to-cfo" in email["marks"]
    browser.evaluate("document.querySelector('#items tr[data-item=\"mis-to-cfo\"]').click()")
    focused = browser.evaluate(
        "Array.from(document.querySelectorAll('#trajectory .part.focus')).map(p => p.dataset.kind)")
    assert "email" in focused


def test_a_met_penalty_is_shown_as_the_penalty_applied_and_an_unmet_one_as_not_applied(tmp_path):
    """A met penalty cost its points: it must not read as a green "met" beside the rewards that earned some."""
    from rubrics.result import ItemResult, Result

    items = [ItemResult(id="reward", kind="criterion", points=2, status="met", method="code", evidence="found"),
             ItemResult(id="untraceable", kind="criterion", points=-3, status="met", method="code", evidence="made up"),
             ItemResult(id="leaks", kind="criterion", points=-2, status="unmet", method="code", evidence="none")]
    result = Result(trajectory_id="t", rubric_id="r", score=0.0, gates_passed=True, earned=-1, total=2,
                    complete=True, items=items)
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(result.to_dict()) + "\n", encoding="utf-8")
    page = tmp_path / "page.html"
    rubric("view", str(results), "--static", str(page))
    dom = dump_dom(page.as_uri() + "#t=0", tmp_path / "profile")
    shown = {tr.attrs["data-item"]: tr.find_all("td")[1].find("span") for tr in rows_of(dom, "items")}
    assert shown["reward"].text() == "met" and shown["reward"].has_class("status-met")
    assert shown["untraceable"].text() == "penalty applied (\u22123)"
    assert shown["untraceable"].has_class("status-penalty")
    assert shown["leaks"].text() == "penalty not applied" and shown["leaks"].has_class("status-not-applied")
    assert [shown[i].attrs["data-status"] for i in ("reward", "untraceable", "leaks")] == ["met", "met", "unmet"]


def test_two_runs_compared_show_differences_flips_and_the_bootstrap_summary(example_runs, example_page, tmp_path):
    a, b = read_results(example_runs.a), read_results(example_runs.b)
    dom = dump_dom(example_page.as_uri() + "#compare", tmp_path / "profile")
    assert dom.find("body").attrs["data-view"] == "compare"
    rows = rows_of(dom, "compare")
    assert len(rows) == len(a)
    for row, ra, rb in zip(rows, a, b):
        cells = row.find_all("td")
        assert cells[0].text() == ra["trajectory_id"]
        assert float(row.attrs["data-difference"]) == pytest.approx(rb["score"] - ra["score"])
        status_b = {i["id"]: i["status"] for i in rb["items"]}
        flips = [f"{i['id']}: {i['status']} → {status_b[i['id']]}" for i in ra["items"]
                 if status_b[i["id"]] != i["status"]]
        assert [p.text() for p in cells[5].find_all("span")] == flips
    diffs = [rb["score"] - ra["score"] for ra, rb in zip(a, b)]
    summary = dom.find("section", id="compare-summary").text()
    improved, regressed = sum(d > 1e-9 for d in diffs), sum(d < -1e-9 for d in diffs)
    assert f"{improved} improved, {regressed} regressed" in summary
    mean = dom.find("div", id="mean-difference").text()
    low, high = (float(x) for x in re.search(r"\[([-+0-9.]+), ([-+0-9.]+)\]", mean).groups())
    assert low <= sum(diffs) / len(diffs) + 1e-3 and sum(diffs) / len(diffs) - 1e-3 <= high
    assert "2000 resamples, seed 20240611" in mean   # the uplift report's


def test_the_judge_evaluation_opens_with_agreement_reliability_and_disagreements(example_runs, tmp_path):
    out = tmp_path / "judge.html"
    rubric("view", str(example_runs.judge_eval), "--static", str(out))
    written = json.loads(example_runs.judge_eval.read_text(encoding="utf-8"))
    dom = dump_dom(out.as_uri(), tmp_path / "profile")
    assert dom.find("body").attrs["data-view"] == "judge"
    agreement = rows_of(dom, "agreement")
    assert [r.find("td").text() for r in agreement] == list(written["report"]["per_item"]) + ["overall"]
    rows = written["label_rows"]
    bins = {min(int(r["probability"] * 10), 9) for r in rows}
    assert len(dom.find("svg", id="reliability").find_all("circle")) == len(bins)
    disagreeing = [r for r in rows if (r["probability"] >= r["threshold"]) != r["met"]]
    shown = dom.find("section", id="disagreements").find_all("div", class_="part disagreement")
    assert len(shown) == len(disagreeing)
    assert disagreeing[0]["evidence"][0]["text"].split("\n")[0] in shown[0].text()


@pytest.fixture(scope="module")
def hostile_page(example_runs, tmp_path_factory) -> tuple[Path, int]:
    """A trajectory whose id and text carry every attack and a 10 MB answer, graded by the real CLI, plus a
    hand-made result of hostile ids, texts, tags and judge names, and a bad line."""
    folder = tmp_path_factory.mktemp("hostile")
    trajectory = {"id": ATTACKS[0], "task_id": ATTACKS[1],
                  "messages": [{"role": "user", "content": HOSTILE_TEXT},
                               {"role": "assistant", "content": "", "tool_calls": [
                                   {"id": "c1", "name": ATTACKS[2], "arguments": {"x": HOSTILE_TEXT}}]},
                               {"role": "tool", "tool_call_id": "c1", "content": HOSTILE_TEXT}],
                  "final_answer": HOSTILE_TEXT + "\n" + "A" * TEN_MB,
                  "state": {"files": {ATTACKS[3]: HOSTILE_TEXT}, "tests": {ATTACKS[4]: HOSTILE_TEXT}}}
    (folder / "trajectories").mkdir()
    (folder / "trajectories" / "hostile.json").write_text(json.dumps(trajectory), encoding="utf-8")
    graded = folder / "graded.jsonl"
    rubric("grade", str(example_runs.rubric), str(folder / "trajectories"), "--judge", "none", "--format", "jsonl",
           "--output", str(graded), check=False)   # rc 1: incomplete without a judge
    made = read_results(example_runs.a)[0]
    made.update(trajectory_id=ATTACKS[5], rubric_id=ATTACKS[6], judge=ATTACKS[7], errors=[HOSTILE_TEXT])
    for item in made["items"]:
        item.update(id=item["id"] + ATTACKS[8], text=HOSTILE_TEXT, evidence=HOSTILE_TEXT, tags=[ATTACKS[1]])
        if item["method"] == "judge":   # as a panel graded it: members' names and errors are text too
            item["members"] = [{"judge": ATTACKS[0], "met": True, "probability": 0.7, "error": None},
                               {"judge": "openai:b", "met": None, "probability": None, "error": ATTACKS[2]}]
    made["tags"] = {ATTACKS[2]: {"earned": 1, "total": 2, "score": 0.5, "complete": True},
                    "constructor": {"earned": 1, "total": 2, "score": 0.5, "complete": True}}   # a prototype name
    with open(graded, "a", encoding="utf-8") as out:
        out.write(json.dumps(made) + "\n" + ATTACKS[0] + "\n")
    page = folder / "hostile.html"
    rubric("view", str(graded), "--trajectories", str(folder / "trajectories"), "--static", str(page))
    return page, 3


def assert_nothing_ran(dom) -> None:
    body = dom.find("body")
    assert PWNED not in body.attrs and "data-js-error" not in body.attrs and body.attrs["data-ready"] == "1"
    assert not dom.find_all("img") and not dom.find_all("iframe") and not dom.find_all("svg")
    assert len(dom.find_all("script")) == 2 and len(dom.find_all("style")) == 1
    assert not [a for a in dom.find_all("a") if not a.attrs.get("href", "").startswith("#")]
    assert not [e for e in dom.iter() if any(k.startswith("on") for k in e.attrs)]
    text = dom.find("div", id="app").text()
    assert "\u202e" not in text and "\u2066" not in text and "U+202E" in text


@pytest.mark.parametrize("fragment", ["#run", "#t=0", "#t=1"])
def test_hostile_text_is_shown_as_text_and_nothing_runs(hostile_page, tmp_path, fragment):
    page, bad_line = hostile_page
    dom = dump_dom(page.as_uri() + fragment, tmp_path / "profile", budget_ms=15000)
    assert_nothing_ran(dom)
    text = dom.find("div", id="app").text()
    assert ATTACKS[1][:30] in text or fragment == "#t=0"
    if fragment == "#run":   # the bad line is listed with its number, the other results shown
        assert f"graded.jsonl:{bad_line}:" in dom.find("section", id="problems").text()
        assert len(rows_of(dom, "runs")) == 2
    if fragment == "#t=0":   # the trajectory with the 10 MB answer: its start, then a button for the rest
        assert "show the remaining" in text and ATTACKS[2] in text and len(text) < 2_000_000
    if fragment == "#t=1":   # the hand-made result: panel members with hostile names and errors
        members = [m.text() for m in dom.find_all("div", class_="member muted")]
        assert members and all(ATTACKS[0] in m or ATTACKS[2] in m for m in members)


def test_a_tag_named_like_a_prototype_property_filters_only_its_rows(hostile_page, tmp_path):
    page, _ = hostile_page
    dom = dump_dom(page.as_uri() + "#run?tag=constructor", tmp_path / "profile", budget_ms=15000)
    shown = [r.find("a").text() for r in rows_of(dom, "runs") if "hidden" not in r.attrs]
    assert shown == [ATTACKS[5]]


def test_hostile_text_stays_inert_when_clicked_through(hostile_page, browser):
    page, _ = hostile_page
    browser.open(page.as_uri() + "#t=1")
    browser.evaluate("document.querySelectorAll('#items tbody tr').forEach(tr => tr.click())")
    browser.evaluate("location.hash = '#run'")
    browser.wait_for("document.body.dataset.view === 'run'")
    browser.evaluate("document.querySelectorAll('th.sortable').forEach(th => th.click())")
    assert browser.evaluate(f"document.body.hasAttribute('{PWNED}')") is False
    assert browser.evaluate("document.title") == "results · graded.jsonl"


def test_1000_generated_results_filter_in_the_browser(tmp_path, artifacts, browser):
    results = generated_results(1000)
    path = tmp_path / "generated.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    page = tmp_path / "generated.html"
    rubric("view", str(path), "--static", str(page))
    browser.open(page.as_uri())
    assert len(browser.evaluate(VISIBLE_ROWS)) == 1000
    steps = [("select[name=gate]", "failed", "change", lambda r: r["gates_passed"] is False),
             ("select[name=uncertain]", "yes", "change",
              lambda r: r["gates_passed"] is False and r["uncertain_items"] > 0),
             ("select[name=gate]", "", "change", lambda r: r["uncertain_items"] > 0),
             ("select[name=tag]", "style", "change", lambda r: r["uncertain_items"] > 0),
             ("input[name=q]", "traj-01", "input",
              lambda r: r["uncertain_items"] > 0 and "traj-01" in r["trajectory_id"])]
    for selector, value, event, keep in steps:
        started = time.perf_counter()
        browser.evaluate(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            el.value = {json.dumps(value)};
            el.dispatchEvent(new Event({json.dumps(event)}, {{bubbles: true}})); }})()""")
        shown = browser.evaluate(VISIBLE_ROWS)
        round_trip_ms = (time.perf_counter() - started) * 1000
        in_page_ms = browser.evaluate("document.getElementById('runs').dataset.filterMs")
        log(artifacts, f"1000 results: {selector}={value!r}: filter {in_page_ms} ms in the page, "
                       f"{round_trip_ms:.0f} ms round trip, {len(shown)} rows shown")
        assert [int(i) for i in shown] == [i for i, r in enumerate(results) if keep(r)]
    browser.evaluate("document.querySelector('th[data-key=score]').click()")
    sorted_ms = browser.evaluate("document.getElementById('runs').dataset.filterMs")
    log(artifacts, f"1000 results: filter and sort by score: {sorted_ms} ms in the page")


def test_the_served_page_answers_on_127_0_0_1_only(example_runs, tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "rubrics.cli.main", "view", str(example_runs.a), "--port", "0",
                                "--trajectories", str(example_runs.trajectories)], cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group()
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.text
        assert httpx.get(url + "other", timeout=30).status_code == 404
        assert httpx.get(url, headers={"Host": "evil.test"}, timeout=30).status_code == 421
        dom = dump_dom(url + "#t=0", tmp_path / "profile")
        assert dom.find("body").attrs["data-view"] == "trajectory"
        assert dom.find("section", id="trajectory").find_all("div", class_="part part-email marked")
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_static_page_loads_nothing_from_anywhere(example_page):
    page = example_page.read_text(encoding="utf-8")
    urls = set(re.findall(r"(?:https?|wss?|ftp)://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}   # the SVG namespace is a name, never fetched
    assert not re.search(r"<(?:link|img|iframe|object|embed)\b", page)
    assert not re.search(r"<script(?![^>]*(?:nonce=|type=\"application/json\"))", page)


def test_screenshots_of_the_views(example_page, tmp_path, artifacts):
    shots = {}
    for name, fragment in (("view-run", "#run"), ("view-trajectory", "#t=0"), ("view-compare", "#compare")):
        shots[name] = screenshot(example_page.as_uri() + fragment, artifacts / f"{name}.png", tmp_path / name)
        assert shots[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shots[name].stat().st_size > 20_000
        log(artifacts, f"screenshot: {shots[name]}")
    shutil.copyfile(example_page, artifacts / "view-example.html")   # the page itself, to open from file://
    log(artifacts, f"page: {artifacts / 'view-example.html'}")
    if os.environ.get("RUBRIC_VIEW_WRITE_DOCS") == "1":
        shutil.copyfile(shots["view-run"], REPO / "docs" / "view.png")
        shutil.copyfile(shots["view-trajectory"], REPO / "docs" / "view-trajectory.png")
        log(artifacts, f"copied to {REPO / 'docs'}")
