"""Evret plugin for Qdrant: evaluate an existing collection, retriever name ``qdrant``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # keeps `import evret_qdrant` light: qdrant-client loads only when used
    if name in ("QdrantRetriever", "index_corpus"):
        from evret_qdrant import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["QdrantRetriever", "index_corpus"]
