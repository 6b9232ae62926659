"""Evret plugin for OpenSearch: evaluate an existing index with BM25 or k-NN queries, retriever name
``opensearch``."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # keeps `import evret_opensearch` light: opensearch-py loads only when used
    if name == "OpenSearchRetriever":
        from evret_opensearch.retriever import OpenSearchRetriever

        return OpenSearchRetriever
    if name == "index_corpus":
        from evret_opensearch.indexing import index_corpus

        return index_corpus
    raise AttributeError(name)


__all__ = ["OpenSearchRetriever", "index_corpus"]
