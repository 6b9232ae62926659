"""The judgment cache moved to :mod:`evret_core.llm.cache`; this module keeps the old import path working."""

from evret_core.llm.cache import (
    CACHE_FILE,
    SCHEMA_VERSION,
    JudgmentCache,
    cache_key,
    default_cache_dir,
    default_cache_path,
    judgment_key,
    resolve_cache,
)

__all__ = ["CACHE_FILE", "SCHEMA_VERSION", "JudgmentCache", "cache_key", "default_cache_dir", "default_cache_path",
           "judgment_key", "resolve_cache"]
