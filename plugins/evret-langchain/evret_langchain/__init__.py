"""Evret plugin for LangChain: evaluate any ``BaseRetriever`` or ``VectorStore`` where it lives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evret_langchain.retriever import LangChainRetriever


def __getattr__(name: str) -> Any:
    # keeps `import evret_langchain` light: langchain-core loads only when the adapter is used
    if name in ("LangChainRetriever", "create_langchain_retriever"):
        from evret_langchain import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["LangChainRetriever", "create_langchain_retriever"]
