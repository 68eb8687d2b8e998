"""A persistent verdict cache: one sqlite file that maps a judgment's key to the verdict it gave.

The key (made by the judge, see CachedJudge) covers everything a verdict depends on: the judge model's identity,
the method, its calibration, the threshold, and the exact prompt (token ids for the embedded engine, the request
bodies for an HTTP judge). So re-grading the same inputs does no model work, and changing the model, the
calibration or one character of evidence misses.

Several `rubric grade` processes may share the file: sqlite serialises the writers (WAL journal, busy timeout),
and every write is one short transaction. The cache is an accelerator, never a source of failure: a sqlite database
that belongs to something else (tables that are not the cache's) is left untouched -- never written, never moved,
never switched to WAL -- and the run goes without a cache, with a warning; a file that is not a sqlite database at
all, or a cache of another format version, is moved aside with a warning and a fresh one started; a cache that is
merely busy (locked by another process past the busy timeout), or that sqlite fails to read at that moment (a disk
I/O error), is not corrupt: the run goes without it, with a warning, and the file stays as it is. A database error
later on turns the cache off for the rest of the run, with a warning, and grading goes on.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from rubrics.judges.protocol import MemberVerdict, Verdict
from rubrics.version import __version__

FORMAT = "agent-rubrics-verdict-cache/1"
CACHE_FILE_NAME = "verdicts.sqlite"
BUSY_TIMEOUT_S = 60.0
_SCHEMA = ("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
           "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL, stored_at REAL NOT NULL)")
_LOOKUP_CHUNK = 500   # keys per SELECT: sqlite limits the number of bound parameters


class VerdictCacheWarning(RuntimeWarning):
    """The verdict cache could not be used as it was; grading went on."""


PATH_ENV = "RUBRICS_VERDICT_CACHE"


def default_cache_path() -> Path:
    """$RUBRICS_VERDICT_CACHE, else verdicts.sqlite in the product's cache directory ($RUBRICS_CACHE, else
    ~/.cache/agent-rubrics)."""
    from rubrics.cache_dir import rubrics_cache_dir

    if os.environ.get(PATH_ENV):
        return Path(os.environ[PATH_ENV]).expanduser()
    return rubrics_cache_dir() / CACHE_FILE_NAME


class VerdictCache:
    """VerdictCache(path): open (or create) the cache file; get_many and put_many never raise."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self._db: sqlite3.Connection | None = None
        self._open()

    @property
    def enabled(self) -> bool:
        return self._db is not None

    def get_many(self, keys: Iterable[str]) -> dict[str, Verdict]:
        """The stored verdicts of those keys that have one."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, Verdict] = {}
        if self._db is None:
            return found
        try:
            for start in range(0, len(wanted), _LOOKUP_CHUNK):
                chunk = wanted[start:start + _LOOKUP_CHUNK]
                rows = self._db.execute(f"SELECT key, verdict FROM verdicts WHERE key IN ({','.join('?' * len(chunk))})",
                                        chunk).fetchall()
                for key, text in rows:
                    verdict = _decode(text)
                    if verdict is not None:
                        found[key] = verdict
        except sqlite3.Error as exc:
            self._give_up("read", exc)
            return {}
        return found

    def put_many(self, entries: Mapping[str, Verdict]) -> None:
        """Store verdicts (only real ones: an error verdict is never cached, so the next run tries again)."""
        rows = [(key, _encode(v), time.time()) for key, v in entries.items() if v.error is None and v.met is not None]
        if self._db is None or not rows:
            return
        try:
            with self._db:   # one transaction: all or nothing
                self._db.executemany("INSERT OR REPLACE INTO verdicts (key, verdict, stored_at) VALUES (?, ?, ?)",
                                     rows)
        except sqlite3.Error as exc:
            self._give_up("write", exc)

    def __len__(self) -> int:
        if self._db is None:
            return 0
        return self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- opening -------------------------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            _warn(f"verdict cache {self.path}: cannot create its directory ({exc}); grading without a cache")
            return
        busy = "this run goes without the cache (the file stays as it is)"
        try:
            damaged = self._inspect()
            if damaged is None:
                self._db = self._connect()
                return
        except _Busy as exc:
            _warn(f"verdict cache {self.path}: busy for more than {BUSY_TIMEOUT_S:g} s ({exc}); {busy}")
            return
        except _ForeignFile as exc:
            _warn(f"verdict cache {self.path}: {exc}; it is not a verdict cache of agent-rubrics, so it was left "
                  "as it is and this run goes without a cache (name another file with --cache, or remove it if it "
                  "is a damaged verdict cache)")
            return
        except _Damaged as exc:
            damaged = str(exc)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                # a disk I/O error, a lock the busy timeout did not outwait: the file may be fine, and another
                # connection may hold verdicts in its journal that moving it would lose
                _warn(f"verdict cache {self.path}: cannot be opened now ({exc}); {busy}")
                return
            damaged = f"not a readable sqlite database ({exc})"
        aside = self._move_aside()
        _warn(f"verdict cache {self.path}: {damaged}; moved it to {aside.name if aside else '(could not move)'} "
              "and started a new cache")
        try:
            self._db = self._connect()
        except _Busy as exc:
            _warn(f"verdict cache {self.path}: busy for more than {BUSY_TIMEOUT_S:g} s ({exc}); {busy}")
        except (sqlite3.Error, _ForeignFile, _Damaged) as exc:
            _warn(f"verdict cache {self.path}: cannot start a new cache ({exc}); grading without a cache")

    def _inspect(self) -> str | None:
        """A first look at the file that changes nothing (no lock, no journal, no WAL: sqlite's immutable mode):
        None when it is absent, empty, a database with no tables, or ours (the connection then checks again,
        under its lock); the reason to move it aside when it is ours but unusable (another version of the
        cache's format, or bytes that are not a sqlite database). Raises _ForeignFile for a database that belongs
        to something else: it is left untouched."""
        try:
            with open(self.path, "rb") as handle:
                header = handle.read(len(_SQLITE_HEADER))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _ForeignFile(f"cannot be read ({exc})") from None
        if not header:
            return None
        if header != _SQLITE_HEADER:
            return "not a readable sqlite database (no sqlite header)"
        uri = "file:" + urllib.parse.quote(str(self.path.resolve())) + "?mode=ro&immutable=1"
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error:
            return None   # the locked connection decides
        try:
            _check_ownership(db)
        except sqlite3.Error:   # a torn read of a file being checkpointed: the locked connection decides
            return None
        finally:
            db.close()
        return None

    def _connect(self) -> sqlite3.Connection:
        """Connect, trying again while the database is busy, up to BUSY_TIMEOUT_S: sqlite answers some lock
        conflicts at once instead of calling its busy handler (switching a file to WAL, which wants it alone, while
        another process opening it at the same moment holds its write lock), so its own timeout does not cover
        them."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = 0.005
        while True:
            try:
                return self._connect_once()
            except sqlite3.OperationalError as exc:
                failure = _busy_or(exc, exc)
                if not isinstance(failure, _Busy) or time.monotonic() + pause > deadline:
                    raise failure from None
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def _connect_once(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout = %d" % int(BUSY_TIMEOUT_S * 1000))
            if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                db.execute("BEGIN IMMEDIATE")   # a rollback-journal file: look before switching it to WAL
                try:
                    _check_ownership(db)
                finally:
                    db.execute("ROLLBACK")
                db.execute("PRAGMA journal_mode = WAL")   # readers never wait for the one writer
            db.execute("BEGIN IMMEDIATE")              # processes opening a new file at once create it once
            try:
                _check_ownership(db)                   # nothing is written into a database of something else
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute("INSERT OR IGNORE INTO meta (name, value) VALUES ('format', ?)", (FORMAT,))
                found = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if found is None or found[0] != FORMAT:
                raise _Damaged(f"written by something else (format {found[0] if found else None!r}, "
                               f"expected {FORMAT!r})")
            self._check_columns(db)
            db.isolation_level = "DEFERRED"   # put_many's `with db:` is then one transaction
            return db
        except BaseException:
            db.close()
            raise

    @staticmethod
    def _check_columns(db: sqlite3.Connection) -> None:
        columns = [row[1] for row in db.execute("PRAGMA table_info(verdicts)")]
        if columns != ["key", "verdict", "stored_at"]:
            raise _Damaged(f"its verdicts table has columns {columns}")

    def _move_aside(self) -> Path | None:
        aside = self.path.with_name(f"{self.path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            self.path.rename(aside)
        except OSError:
            return None
        for suffix in ("-wal", "-shm"):   # a damaged file's journal must not be replayed into the new one
            try:
                Path(f"{self.path}{suffix}").rename(Path(f"{aside}{suffix}"))
            except OSError:
                pass
        return aside

    def _give_up(self, action: str, exc: sqlite3.Error) -> None:
        _warn(f"verdict cache {self.path}: cannot {action} ({type(exc).__name__}: {exc}); "
              "the rest of this run goes without the cache")
        self.close()


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """Whether sqlite says the file itself is bad (not a database, a malformed image), as opposed to failing to
    read it now."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    if name:
        return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))
    text = str(exc)
    return "not a database" in text or "malformed" in text


class _ForeignFile(Exception):
    pass


class _Damaged(Exception):
    """Ours, but unusable as it is: moved aside."""


class _Busy(Exception):
    """Another process held the database locked past the busy timeout: the file is fine, just in use."""


_SQLITE_HEADER = b"SQLite format 3\x00"
_BUSY_CODES = ("SQLITE_BUSY", "SQLITE_LOCKED")


def _check_ownership(db: sqlite3.Connection) -> None:
    """Raise _ForeignFile unless the database has no tables or has the cache's meta table; _Damaged for a cache of
    another version of the format."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return
    if "meta" not in tables:
        raise _ForeignFile(f"a sqlite database of something else (tables {', '.join(sorted(tables))})")
    found = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    value = found[0] if found else None
    if value == FORMAT:
        return
    if isinstance(value, str) and value.startswith(FORMAT.rsplit("/", 1)[0] + "/"):
        raise _Damaged(f"written by another version of the cache (format {value!r}, expected {FORMAT!r})")
    raise _ForeignFile(f"a sqlite database of something else (tables {', '.join(sorted(tables))}; "
                       f"format {value!r}, expected {FORMAT!r})")


def _busy_or(exc: sqlite3.Error, other: Exception) -> Exception:
    """_Busy for a lock held by someone else, else `other`."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(_BUSY_CODES) or "database is locked" in str(exc) or "database is busy" in str(exc):
        return _Busy(str(exc))
    return other


def _warn(message: str) -> None:
    warnings.warn(message, VerdictCacheWarning, stacklevel=3)


def _encode(verdict: Verdict) -> str:
    return json.dumps({"met": verdict.met, "probability": verdict.probability, "rationale": verdict.rationale,
                       "members": [m.model_dump(mode="json") for m in verdict.members], "detail": verdict.detail},
                      allow_nan=False)


# How the head, likelihood and statement methods' numbers began when they were stored as the rationale.
_FORMER_DETAILS = ("head logit ", "likelihood p=", "statement p=")


def _decode(text: str) -> Verdict | None:
    """The stored verdict, or None for an entry that does not read as one (treated as a miss)."""
    try:
        data = json.loads(text)
        met, probability = data["met"], data["probability"]
        if not isinstance(met, bool) or not (probability is None or isinstance(probability, float | int)):
            return None
        members = tuple(MemberVerdict.model_validate(m) for m in data.get("members") or ())
        rationale, detail = data.get("rationale"), data.get("detail")
        if "detail" not in data and isinstance(rationale, str) and rationale.startswith(_FORMER_DETAILS):
            rationale, detail = None, rationale   # stored before a method's numbers had a field of their own
        return Verdict(met=met, probability=probability, rationale=rationale if isinstance(rationale, str) else None,
                       members=members, detail=detail if isinstance(detail, str) else None)
    except (ValueError, KeyError, TypeError):
        return None


def verdict_key(parts: Mapping) -> str:
    """The cache key of a judgment: sha256 of the canonical JSON of what its verdict depends on (as the judge
    lists it), the cache format and the package version (a release may change how a verdict is computed)."""
    import hashlib

    text = json.dumps({"format": FORMAT, "package": __version__, **parts}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()
