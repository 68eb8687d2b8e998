"""The verdict cache: the sqlite store (several processes writing at once, corrupt, foreign and busy files), CachedJudge
around a keyed judge, and the keys of the real judges (model, calibration, one character of evidence)."""
from __future__ import annotations

import multiprocessing
import sqlite3
import warnings

import pytest

from rubrics.judges.cache.cached import CachedJudge
from rubrics.judges.protocol import MemberVerdict, Verdict
from rubrics.judges.usage import JudgeUsage
from rubrics.judges.cache.verdict_cache import VerdictCache, VerdictCacheWarning, default_cache_path, verdict_key
from rubrics.judges.protocol import EvidenceBlock
from test_judge_prompts import request as prompt_request


def request(item_id: str, criterion: str, evidence: str = "Total travel spend: 48.2L."):
    return prompt_request(id=item_id, criterion=criterion, evidence=(EvidenceBlock("final_answer", evidence),))


def test_verdicts_round_trip_and_errors_are_never_stored(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    panel = Verdict(met=True, probability=0.7, rationale="why",
                    members=(MemberVerdict(judge="a", met=True, probability=0.9), MemberVerdict(
                        judge="b", met=None, probability=None, error="down")))
    cache.put_many({"k1": Verdict(met=False, probability=0.2), "k2": panel,
                    "k3": Verdict(met=None, probability=None, error="boom")})
    again = VerdictCache(tmp_path / "v.sqlite")   # another connection sees the committed rows
    found = again.get_many(["k1", "k2", "k3", "k4"])
    assert set(found) == {"k1", "k2"} and len(again) == 2
    assert found["k1"] == Verdict(met=False, probability=0.2)
    assert found["k2"] == panel


def test_the_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICS_VERDICT_CACHE", str(tmp_path / "x.sqlite"))
    assert default_cache_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("RUBRICS_VERDICT_CACHE")
    monkeypatch.setenv("RUBRICS_CACHE", str(tmp_path / "root"))
    assert default_cache_path() == tmp_path / "root" / "verdicts.sqlite"


def _writer(path: str, worker: int, count: int) -> None:
    warnings.simplefilter("error", VerdictCacheWarning)   # a cache given up is a failed worker, with its reason
    cache = VerdictCache(path)
    for start in range(0, count, 10):   # many small transactions, interleaved with the other processes'
        cache.put_many({f"w{worker}-{i}": Verdict(met=i % 2 == 0, probability=i / count)
                        for i in range(start, start + 10)})
        cache.get_many([f"w{(worker + 1) % 4}-{start}"])


def test_several_processes_write_the_same_new_file_at_once(tmp_path):
    path = str(tmp_path / "shared.sqlite")   # created by whichever process gets there first
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, worker, 200)) for worker in range(4)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=120)
    assert [p.exitcode for p in workers] == [0, 0, 0, 0]
    cache = VerdictCache(path)
    assert len(cache) == 800
    found = cache.get_many(f"w{w}-{i}" for w in range(4) for i in range(200))
    assert len(found) == 800 and found["w3-7"] == Verdict(met=False, probability=7 / 200)


@pytest.mark.parametrize("content", [b"this is not a database" * 100, b""], ids=["garbage", "empty"])
def test_a_corrupt_file_is_moved_aside_with_a_warning(tmp_path, content):
    path = tmp_path / "v.sqlite"
    path.write_bytes(content)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = VerdictCache(path)
    if content:   # an empty file is a valid new sqlite database: nothing to move
        assert any(issubclass(w.category, VerdictCacheWarning) and "moved it to" in str(w.message) for w in caught)
        assert [p.read_bytes() for p in tmp_path.glob("v.sqlite.bad-*")] == [content]
    cache.put_many({"k": Verdict(met=True, probability=0.8)})
    assert cache.get_many(["k"])["k"].met is True


def _foreign_database(path, *, wal: bool = False):
    other = sqlite3.connect(path)
    if wal:
        other.execute("PRAGMA journal_mode = WAL")
    other.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    other.execute("INSERT INTO meta VALUES ('format', 'someone-else/3')")
    other.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
    other.commit()
    other.close()


def _siblings(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
def test_a_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path, wal):
    path = tmp_path / "v.sqlite"
    _foreign_database(path, wal=wal)
    before, names = path.read_bytes(), _siblings(tmp_path)
    with pytest.warns(VerdictCacheWarning, match="someone-else/3.*left as it is"):
        cache = VerdictCache(path)
    assert not cache.enabled and cache.get_many(["k"]) == {}
    cache.put_many({"k": Verdict(met=True, probability=0.9)})   # a no-op, not an exception, not a write
    assert path.read_bytes() == before and _siblings(tmp_path) == names   # no new tables, no WAL, no move


def test_a_symlink_to_another_applications_database_is_refused_untouched(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    _foreign_database(app / "orders.db")
    before = (app / "orders.db").read_bytes()
    (tmp_path / "v.sqlite").symlink_to(app / "orders.db")
    with pytest.warns(VerdictCacheWarning, match="tables meta, orders"):
        cache = VerdictCache(tmp_path / "v.sqlite")
    assert not cache.enabled
    assert (app / "orders.db").read_bytes() == before and _siblings(app) == ["orders.db"]
    assert (tmp_path / "v.sqlite").is_symlink()


def test_a_database_without_a_meta_table_is_foreign(tmp_path):
    path = tmp_path / "v.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL, stored_at REAL NOT NULL)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.warns(VerdictCacheWarning, match="tables verdicts"):
        assert not VerdictCache(path).enabled
    assert path.read_bytes() == before


def test_a_cache_of_another_format_version_is_moved_aside(tmp_path):
    path = tmp_path / "v.sqlite"
    VerdictCache(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = 'agent-rubrics-verdict-cache/0' WHERE name = 'format'")
    db.commit()
    db.close()
    with pytest.warns(VerdictCacheWarning, match="another version.*moved it to"):
        cache = VerdictCache(path)
    assert cache.enabled and len(list(tmp_path.glob("v.sqlite.bad-*"))) == 1


def test_a_busy_cache_is_busy_not_corrupt(tmp_path, monkeypatch):
    import rubrics.judges.cache.verdict_cache as verdict_cache

    path = tmp_path / "v.sqlite"
    cache = VerdictCache(path)
    cache.put_many({"k": Verdict(met=True, probability=0.9)})
    cache.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")   # another process in the middle of a long write
    monkeypatch.setattr(verdict_cache, "BUSY_TIMEOUT_S", 0.05)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            busy = VerdictCache(path)
        messages = [str(w.message) for w in caught if issubclass(w.category, VerdictCacheWarning)]
        assert len(messages) == 1 and "busy" in messages[0] and "without the cache" in messages[0], messages
        assert not busy.enabled and not list(tmp_path.glob("v.sqlite.bad-*"))   # nothing moved aside
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert VerdictCache(path).get_many(["k"])["k"].met is True   # the same file, once free


def test_a_file_another_process_starts_writing_as_it_is_switched_to_wal_is_switched_once_it_is_free(
        tmp_path, monkeypatch):
    """Switching a file to WAL wants it alone, and sqlite answers 'database is locked' at once, without its busy
    handler, when another connection holds the write lock: four processes creating one file lost a worker's
    verdicts this way (the other took its write lock between the first's look at the file and its switch)."""
    import threading

    import rubrics.judges.cache.verdict_cache as verdict_cache

    path = tmp_path / "v.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    release = threading.Timer(0.3, lambda: other.execute("ROLLBACK"))
    real_connect = sqlite3.connect

    def connect_and_race(*args, **kwargs):
        db = real_connect(*args, **kwargs)

        def the_other_process_begins_writing(statement: str) -> None:
            if statement == "PRAGMA journal_mode = WAL" and not release.is_alive() and not release.finished.is_set():
                other.execute("BEGIN IMMEDIATE")   # just before the switch, as the other process did
                release.start()

        db.set_trace_callback(the_other_process_begins_writing)
        return db

    monkeypatch.setattr(verdict_cache.sqlite3, "connect", connect_and_race)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", VerdictCacheWarning)
            cache = VerdictCache(path)
    finally:
        if release.is_alive():
            release.join()
    monkeypatch.undo()
    assert release.finished.is_set()   # the race did happen
    assert cache.enabled and cache._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.put_many({"k": Verdict(met=True, probability=0.9)})
    other.close()
    assert VerdictCache(path).get_many(["k"])["k"].met is True


def test_a_disk_error_while_opening_keeps_the_file_and_its_journal(tmp_path, monkeypatch):
    """A judge benchmark lost 44 minutes of verdicts this way: a second connection of the same process met a
    'disk I/O error' while opening, took the cache for damaged and moved it aside with the journal another
    connection was still writing. A read failure is not a damaged file: the run goes on without the cache."""
    import rubrics.judges.cache.verdict_cache as verdict_cache

    path = tmp_path / "v.sqlite"
    writer = VerdictCache(path)
    writer.put_many({"k": Verdict(met=True, probability=0.9)})   # still in the journal, and the writer stays open

    def failing(self):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(verdict_cache.VerdictCache, "_connect_once", failing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = VerdictCache(path)
    messages = [str(w.message) for w in caught if issubclass(w.category, VerdictCacheWarning)]
    assert len(messages) == 1 and "cannot be opened now (disk I/O error)" in messages[0], messages
    assert "without the cache (the file stays as it is)" in messages[0]
    assert not second.enabled and not list(tmp_path.glob("v.sqlite.bad-*"))
    assert writer.get_many(["k"])["k"].met is True
    monkeypatch.undo()
    writer.close()
    assert VerdictCache(path).get_many(["k"])["k"].met is True


def test_a_planted_verdict_whose_met_disagrees_with_its_probability_is_a_miss(tmp_path):
    inner = KeyedScriptedJudge()
    cache = VerdictCache(tmp_path / "v.sqlite")
    judge = CachedJudge(inner, cache)
    key, = inner.cache_keys([request("a", "A")])
    db = sqlite3.connect(tmp_path / "v.sqlite")
    db.execute("INSERT INTO verdicts VALUES (?, ?, 0)", (key, '{"met": true, "probability": 0.02}'))
    db.commit()
    db.close()
    inner.answer = Verdict(met=False, probability=0.1)
    verdict, = judge.judge([request("a", "A")])
    assert inner.calls == [["a"]]                  # judged again, not read from the planted entry
    assert verdict.met is False and verdict.probability == 0.1
    again, = judge.judge([request("a", "A")])      # the real verdict replaced the planted one
    assert inner.calls == [["a"]] and again.met is False and again.usage == JudgeUsage(cached_verdicts=1)


@pytest.mark.parametrize("stored", ['{"met": false, "probability": 0.9}', '{"met": true, "probability": 1.5}',
                                    '{"met": true, "probability": null}', '{"met": true, "probability": -0.1}',
                                    '{"met": true, "probability": true}'])
def test_an_inconsistent_stored_verdict_is_judged_again(tmp_path, stored):
    inner = KeyedScriptedJudge()
    judge = CachedJudge(inner, VerdictCache(tmp_path / "v.sqlite"))
    key, = inner.cache_keys([request("a", "A")])
    db = sqlite3.connect(tmp_path / "v.sqlite")
    db.execute("INSERT INTO verdicts VALUES (?, ?, 0)", (key, stored))
    db.commit()
    db.close()
    verdict, = judge.judge([request("a", "A")])
    assert inner.calls == [["a"]] and verdict.met is True and verdict.probability == 0.8


def test_met_follows_the_items_threshold_not_the_stored_flag(tmp_path):
    from dataclasses import replace as replaced

    inner = KeyedScriptedJudge()
    judge = CachedJudge(inner, VerdictCache(tmp_path / "v.sqlite"))
    judge.judge([request("a", "A")])              # stored: met, probability 0.8 at the default threshold 0.5
    strict = request("a", "A")
    strict = replaced(strict, item=replaced(strict.item, threshold=0.9))   # same key (the fake keys ignore it)
    verdict, = judge.judge([strict])
    assert len(inner.calls) == 2 and verdict.met is True   # 0.8 < 0.9 contradicts the stored met: judged again


def test_a_damaged_entry_is_a_miss_and_a_database_error_turns_the_cache_off(tmp_path):
    path = tmp_path / "v.sqlite"
    cache = VerdictCache(path)
    cache.put_many({"good": Verdict(met=True, probability=0.9)})
    db = sqlite3.connect(path)
    db.execute("INSERT INTO verdicts VALUES ('bad', '{\"met\": \"yes\"}', 0)")
    db.commit()
    db.close()
    assert set(cache.get_many(["good", "bad"])) == {"good"}
    cache._db.execute("DROP TABLE verdicts")   # something deletes the table under a running grade
    with pytest.warns(VerdictCacheWarning, match="cannot read"):
        assert cache.get_many(["good"]) == {}
    assert not cache.enabled
    cache.put_many({"x": Verdict(met=True, probability=0.9)})   # a no-op, not an exception


class KeyedScriptedJudge:
    """Keys each request by its item id and evidence; answers met with probability 0.8 unless told to fail."""

    name = "keyed"

    def __init__(self):
        self.calls: list[list[str]] = []
        self.fail: set[str] = set()
        self.answer = Verdict(met=True, probability=0.8, usage=JudgeUsage(prompt_tokens=10))

    def cache_keys(self, requests):
        return [verdict_key({"item": r.item.id, "evidence": [b.text for b in r.context.evidence]})
                for r in requests]

    def judge(self, requests):
        self.calls.append([r.item.id for r in requests])
        return [Verdict(met=None, probability=None, error="flaky") if r.item.id in self.fail
                else self.answer for r in requests]


def test_cached_judge_sends_only_the_misses_in_one_call_and_never_caches_errors(tmp_path):
    inner = KeyedScriptedJudge()
    inner.fail = {"b"}
    judge = CachedJudge(inner, VerdictCache(tmp_path / "v.sqlite"))
    first = judge.judge([request("a", "A"), request("b", "B"), request("c", "C")])
    assert inner.calls == [["a", "b", "c"]] and first[1].error == "flaky"
    assert first[0].usage == JudgeUsage(prompt_tokens=10)
    inner.fail = set()
    second = judge.judge([request("a", "A"), request("b", "B"), request("c", "C"), request("d", "D")])
    assert inner.calls[1] == ["b", "d"]          # a and c from the cache; b failed last time, so it is judged again
    assert [v.met for v in second] == [True, True, True, True]
    assert second[0].usage == JudgeUsage(cached_verdicts=1) and second[1].usage == JudgeUsage(prompt_tokens=10)
    changed = judge.judge([request("a", "A", evidence="final answer, one character changed!")])
    assert inner.calls[2] == ["a"] and changed[0].usage.cached_verdicts == 0


def test_a_judge_without_keys_is_judged_every_time(tmp_path):
    from rubric_fakes import ScriptedJudge

    inner = ScriptedJudge()
    judge = CachedJudge(inner, VerdictCache(tmp_path / "v.sqlite"))
    for _ in range(2):
        assert judge.judge([request("a", "A")])[0].met is True
    assert len(inner.calls) == 2 and judge.name == "scripted"
