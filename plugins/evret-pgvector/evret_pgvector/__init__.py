"""Evret plugin for PostgreSQL + pgvector: evaluate an existing table, retriever name ``pgvector``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # keeps `import evret_pgvector` light: psycopg loads only when used
    if name in ("PgVectorRetriever", "index_corpus", "create_index"):
        from evret_pgvector import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["PgVectorRetriever", "create_index", "index_corpus"]
