"""Evret plugin for LanceDB: evaluate an existing table, retriever name ``lancedb``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # keeps `import evret_lancedb` light: lancedb loads only when used
    if name in ("LanceDBRetriever", "index_corpus"):
        from evret_lancedb import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["LanceDBRetriever", "index_corpus"]
