"""Evret plugin for LlamaIndex: evaluate any ``BaseRetriever`` (or index) where it lives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evret_llamaindex.retriever import LlamaIndexRetriever


def __getattr__(name: str) -> Any:
    # keeps `import evret_llamaindex` light: llama-index-core loads only when the adapter is used
    if name in ("LlamaIndexRetriever", "create_llamaindex_retriever"):
        from evret_llamaindex import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["LlamaIndexRetriever", "create_llamaindex_retriever"]
