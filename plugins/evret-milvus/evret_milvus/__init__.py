"""Evret plugin for Milvus: evaluate an existing collection, retriever name ``milvus``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # keeps `import evret_milvus` light: pymilvus loads only when used
    if name in ("MilvusRetriever", "index_corpus"):
        from evret_milvus import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["MilvusRetriever", "index_corpus"]
