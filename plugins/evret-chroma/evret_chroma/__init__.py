"""Evret plugin for Chroma: evaluate an existing collection, retriever name ``chroma``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # keeps `import evret_chroma` light: chromadb loads only when used
    if name in ("ChromaRetriever", "index_corpus"):
        from evret_chroma import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["ChromaRetriever", "index_corpus"]
