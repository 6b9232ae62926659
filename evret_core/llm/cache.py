"""The persistent answer cache of every LLM call: one SQLite file shared by runs and processes.

Each answer is one row under a key from :func:`cache_key` (SHA-256 over everything that changes the answer),
inserted and committed as soon as the answer arrives, so a run that is killed keeps every answer it paid for and a
rerun asks only for the rest. The file uses WAL journaling and a busy timeout, so several processes can read and
write it at once without corrupting it. A file that cannot be written (read-only file or folder) is still read:
hits are served, new answers are not stored, and :attr:`JudgmentCache.read_only` says so. A file whose
``judgments`` table has other columns is an :class:`~evret_core.contracts.errors.EvretError` naming the file. An answer
longer than :data:`MAX_STORED_CHARS` is never stored (:attr:`JudgmentCache.oversized` counts them): the client
refuses such answers before, this bounds every other writer.

Location: the ``cache=`` option of a judge (a file path, or a folder), else ``$EVRET_CACHE_DIR/judgments.sqlite3``,
else ``judgments.sqlite3`` in the user cache folder (``platformdirs.user_cache_dir("evret")``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.paths import CACHE_FILE, default_cache_path

SCHEMA_VERSION = 1
MAX_STORED_CHARS = 1_000_000  # the client's own bound (client.answer_limit) is far lower for judgments
_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    answer TEXT NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = ("key", "judge", "provider", "model", "answer", "input_tokens", "output_tokens", "created")


def resolve_cache(cache: Any) -> JudgmentCache | None:
    """The cache a judge's ``cache=`` option asks for: None/True = the default file, False = none, a path = that
    file (or ``judgments.sqlite3`` in that folder), or a :class:`JudgmentCache` as is."""
    if cache is False or (isinstance(cache, str) and cache.strip().lower() in ("false", "off", "no", "0", "none")):
        return None
    if isinstance(cache, JudgmentCache):
        return cache
    if cache is None or cache is True:
        return JudgmentCache(default_cache_path())
    if isinstance(cache, (str, os.PathLike)):
        path = Path(cache).expanduser()
        if path.is_dir() or str(cache).endswith(("/", os.sep)):
            path = path / CACHE_FILE
        return JudgmentCache(path)
    raise EvretError(f"option 'cache': expected true, false or a path, got {cache!r}")


def cache_key(parts: Mapping[str, Any]) -> str:
    """The one key scheme: SHA-256 of ``parts`` as canonical JSON (sorted keys); changing any part misses."""
    payload = json.dumps(dict(parts), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def judgment_key(*, judge: str, provider: str | None, model: str | None, prompt: str, temperature: float,
                 query: str, expected: str, retrieved: str, extra: Any = None) -> str:
    """The key of one LLMJudge judgment (:func:`cache_key` over these parts)."""
    return cache_key({"judge": judge, "provider": provider, "model": model, "prompt": prompt,
                      "temperature": float(temperature), "query": query, "expected": expected,
                      "retrieved": retrieved, "extra": extra})


class JudgmentCache:
    """A key -> answer store in one SQLite file; safe to share between threads and processes."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 60.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.read_only = False  # True once the file turned out not to be writable: answers are not stored
        self.unstored = 0  # answers not stored because the file is read-only
        self.oversized = 0  # answers not stored because they are longer than MAX_STORED_CHARS

    def __repr__(self) -> str:
        return f"JudgmentCache({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.path.is_dir():
            raise EvretError(f"judgment cache {self.path}: is a folder, not a file")
        try:
            if self.path.is_file() and not self.path.stat().st_mode & 0o222:
                conn = self._open_read_only()  # no write bit at all: read-only by intent, even for root
            else:
                conn = self._open_writable()
        except sqlite3.OperationalError as exc:
            # A file we may not write (read-only file or folder) can still answer: open it for reading only.
            message = str(exc).lower()
            if not self.path.is_file() or not ("readonly" in message or "unable to open" in message):
                raise EvretError(f"judgment cache {self.path}: cannot open ({exc})") from None
            conn = self._open_read_only()
        except (OSError, sqlite3.Error) as exc:
            raise EvretError(f"judgment cache {self.path}: cannot open ({exc})") from None
        self._check_schema(conn)
        self._conn = conn
        return conn

    def _open_writable(self) -> sqlite3.Connection:
        # Processes opening one file at the same moment (cluster workers starting together) can get "database is
        # locked" from the WAL switch or the schema, which SQLite's busy handler does not wait out: try again.
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                return self._open_writable_once()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.05 + random.random() * 0.1)

    def _open_writable_once(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta(name, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except sqlite3.OperationalError:
            conn.close()
            raise
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise EvretError(f"judgment cache {self.path}: not a usable SQLite file ({exc}); delete it or "
                             f"point cache= elsewhere") from None
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        from urllib.parse import quote

        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_s, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.Error:
            # A WAL file without its -shm beside it, in a folder we cannot write: read it as immutable.
            try:
                conn = sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None,
                                       check_same_thread=False)
                conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise EvretError(f"judgment cache {self.path}: cannot read it ({exc})") from None
        self.read_only = True
        return conn

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        try:
            columns = tuple(row[1] for row in conn.execute("PRAGMA table_info(judgments)").fetchall())
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise EvretError(f"judgment cache {self.path}: not a usable SQLite file ({exc}); delete it or "
                             f"point cache= elsewhere") from None
        if set(_COLUMNS) - set(columns):
            conn.close()
            found = ", ".join(columns) or "no judgments table"
            raise EvretError(f"judgment cache {self.path}: not an Evret cache (table 'judgments' has columns "
                             f"{found}; expected {', '.join(_COLUMNS)}); delete it or point cache= elsewhere")

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The cached rows for ``keys`` that exist: key -> {answer, provider, model, input_tokens, output_tokens}."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            conn = self._connect()
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT key, answer, provider, model, input_tokens, output_tokens FROM judgments "
                    f"WHERE key IN ({marks})", chunk,
                ).fetchall()
                for key, answer, provider, model, n_in, n_out in rows:
                    found[key] = {"answer": answer, "provider": provider, "model": model,
                                  "input_tokens": n_in, "output_tokens": n_out}
        return found

    def put(self, key: str, answer: str, *, judge: str, provider: str | None = None, model: str | None = None,
            input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Store one answer and commit it at once (a killed run keeps it); counted in :attr:`unstored` instead
        when the file is read-only, and in :attr:`oversized` (never stored) when longer than
        :data:`MAX_STORED_CHARS`."""
        if len(answer) > MAX_STORED_CHARS:
            with self._lock:
                self.oversized += 1
            return
        with self._lock:
            conn = self._connect()
            if self.read_only:
                self.unstored += 1
                if self.unstored == 1:  # once per cache, not once per answer
                    warnings.warn(f"judgment cache {self.path}: the file is read-only; cached answers are used, "
                                  "new answers are not stored", RuntimeWarning, stacklevel=2)
                return
            conn.execute(
                "INSERT OR REPLACE INTO judgments(key, judge, provider, model, answer, input_tokens, output_tokens, "
                "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, judge, provider, model, answer, int(input_tokens), int(output_tokens), time.time()),
            )

    def stats(self) -> dict[str, Any]:
        """Where the file is, its size, and how many judgments it holds per judge, provider and model."""
        info: dict[str, Any] = {"path": str(self.path), "exists": self.path.exists(), "entries": 0,
                                "size_bytes": 0, "by_model": []}
        if not self.path.exists():
            return info
        with self._lock:
            conn = self._connect()
            info["entries"] = conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
            rows = conn.execute(
                "SELECT judge, provider, model, COUNT(*), SUM(input_tokens), SUM(output_tokens) FROM judgments "
                "GROUP BY judge, provider, model ORDER BY judge, provider, model"
            ).fetchall()
        info["by_model"] = [
            {"judge": j, "provider": p, "model": m, "entries": n, "input_tokens": i or 0, "output_tokens": o or 0}
            for j, p, m, n, i, o in rows
        ]
        info["size_bytes"] = sum(
            f.stat().st_size for f in self.path.parent.glob(self.path.name + "*") if f.is_file()
        )
        return info

    def clear(self) -> int:
        """Delete every judgment; returns how many there were."""
        if not self.path.exists():
            return 0
        with self._lock:
            conn = self._connect()
            if self.read_only:
                raise EvretError(f"judgment cache {self.path}: read-only, cannot clear it")
            n = conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
            conn.execute("DELETE FROM judgments")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
        return int(n)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
