"""The persistent embedding cache: embeddings on disk, keyed by model and text, in one SQLite file."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import EvretError

__all__ = ["EmbeddingCache"]


def cache_dir() -> Path:
    """Where Evret keeps caches: ``$EVRET_CACHE_DIR``, else the user cache folder (``~/.cache/evret``)."""
    from evret_core.sdk import default_cache_dir

    return default_cache_dir()


class EmbeddingCache:
    """Embeddings on disk, keyed by model and text, in one SQLite file: reruns encode nothing.

    Safe for several processes at once (SQLite WAL); a row is written only once its vector is complete.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_hash BLOB NOT NULL, "
                "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_hash))"
            )
            self._conn.commit()
        except (OSError, sqlite3.Error) as exc:
            raise EvretError(f"embedding cache {self.path}: cannot be opened: {exc}") from None
        self._lock = threading.Lock()

    @classmethod
    def from_option(cls, cache: Any, what: str = "cache") -> EmbeddingCache | None:
        """``None``/``False``: no cache; ``True`` or ``"default"``: ``embeddings.sqlite`` in the Evret cache folder;
        a path: that file, or ``embeddings.sqlite`` in that folder."""
        if cache is None or cache is False:
            return None
        if isinstance(cache, str) and cache.strip().lower() in ("false", "off", "no", "0", "none", ""):
            return None
        if isinstance(cache, EmbeddingCache):
            return cache
        if cache is True or (isinstance(cache, str) and cache.strip().lower() in ("default", "true", "1", "yes")):
            return cls(cache_dir() / "embeddings.sqlite")
        if isinstance(cache, (str, os.PathLike)):
            path = Path(cache).expanduser()
            return cls(path / "embeddings.sqlite" if path.is_dir() else path)
        raise EvretError(f"{what}: expected true, false or a file path, got {cache!r}")

    @staticmethod
    def _hash(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8")).digest()

    def get_many(self, model_key: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors of those ``texts`` that have one."""
        by_hash = {self._hash(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        hashes = list(by_hash)
        with self._lock:
            for start in range(0, len(hashes), 500):
                chunk = hashes[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT text_hash, dim, vector FROM embeddings WHERE model = ? AND text_hash IN ({marks})",
                    [model_key, *chunk],
                ).fetchall()
                for text_hash, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == dim:
                        found[by_hash[bytes(text_hash)]] = vector
        return found

    def put_many(self, model_key: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [
            (model_key, self._hash(t), int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock:
            with self._conn:
                self._conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
