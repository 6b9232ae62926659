"""Where Evret keeps its files between runs: the cache folder (``$EVRET_CACHE_DIR``, else the user cache folder) and
the judgment cache in it (the LLM layer opens it; the output guard refuses to overwrite it)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_FILE", "default_cache_dir", "default_cache_path"]

CACHE_FILE = "judgments.sqlite3"


def default_cache_dir() -> Path:
    """``$EVRET_CACHE_DIR`` when set, else the user cache folder for ``evret``."""
    env = os.environ.get("EVRET_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("evret"))


def default_cache_path() -> Path:
    return default_cache_dir() / CACHE_FILE
