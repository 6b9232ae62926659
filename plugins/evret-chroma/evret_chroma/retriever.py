"""Search an existing Chroma collection as an Evret retriever; a helper indexes corpus files for demos and tests.

Queries are always sent as embeddings that Evret computes with the user's embedder (or takes from precomputed query
embeddings): Chroma's default embedding function downloads a model, and is never called.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import (
    EvretError,
    QueryVectors,
    RankedColumns,
    RetrievalResult,
    Retriever,
    batched,
    corpus_batches,
    resolve_embedder,
)


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def make_client(path: str | None = None, host: str | None = None, port: int = 8000) -> Any:
    """A Chroma client with telemetry off: persistent at ``path``, HTTP at ``host``, else ephemeral (in memory)."""
    import chromadb

    if path and host:
        raise EvretError("chroma retriever: give the option 'path' or 'host', not both")
    if path:
        return chromadb.PersistentClient(path=str(path), settings=_settings())
    if host:
        return chromadb.HttpClient(host=host, port=port, settings=_settings())
    return chromadb.EphemeralClient(settings=_settings())


class ChromaRetriever(Retriever):
    """Queries an existing Chroma collection; it never writes to it.

    Query vectors come from ``embedding`` (a function ``list[str] -> vectors``, a LangChain ``Embeddings`` or a
    sentence-transformers model name) or from ``query_embeddings`` (query text -> vector, computed elsewhere).
    ``where`` and ``where_document`` filters are passed to every query. The score is the negated Chroma distance,
    so that higher is better; the distance itself is kept in the metadata.
    """

    name = "chroma"

    def __init__(
        self,
        collection: str,
        embedding: Any = None,
        query_embeddings: Mapping[str, Sequence[float]] | None = None,
        client: Any = None,
        path: str | None = None,
        host: str | None = None,
        port: int = 8000,
        where: dict[str, Any] | None = None,
        where_document: dict[str, Any] | None = None,
        batch_size: int = 64,
    ) -> None:
        if (embedding is None) == (query_embeddings is None):
            raise EvretError("chroma retriever: give exactly one of the options 'embedding' (how to embed queries) "
                             "and 'query_embeddings' (query text -> vector); Chroma's default embedding function "
                             "is never used")
        self.client = client if client is not None else make_client(path, host, port)
        existing = sorted(c if isinstance(c, str) else c.name for c in self.client.list_collections())
        if collection not in existing:
            raise EvretError(f"chroma retriever: option 'collection': no collection {collection!r} "
                             f"(existing: {', '.join(existing) or 'none'}); index it first, e.g. with "
                             f"evret_chroma.index_corpus")
        self.collection = self.client.get_collection(collection)
        self._vectors = QueryVectors(embedding, query_embeddings, "chroma retriever")
        self.where = where
        self.where_document = where_document
        self.batch_size = max(1, int(batch_size))

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _answers(self, queries: Sequence[str], k: int,
                 metadatas: bool) -> Iterator[tuple[list[Any], list[Any], list[Any] | None, list[Any]]]:
        """(ids, documents, metadatas or None, distances) per query, from one Chroma query per batch; the
        metadatas are asked for only when ``metadatas``."""
        include = ["documents", "metadatas", "distances"] if metadatas else ["documents", "distances"]
        for chunk in batched(queries, self.batch_size):
            answer = self.collection.query(
                query_embeddings=self._vectors(chunk), n_results=k, where=self.where,
                where_document=self.where_document, include=include,
            )
            for i in range(len(chunk)):
                yield (answer["ids"][i], answer["documents"][i],
                       answer["metadatas"][i] if metadatas else None, answer["distances"][i])

    def _ranked(self, queries: Sequence[str], k: int,
                metadatas: bool) -> Iterator[tuple[RankedColumns, list[dict[str, Any]] | None]]:
        """Per query its columns (score = -distance) and, when ``metadatas``, one metadata dict per row: Chroma's
        metadata with the document as ``text`` and the distance."""
        for ids, documents, metas, distances in self._answers(queries, k, metadatas):
            dist = np.asarray(distances, dtype=np.float64)
            metadata = None if metas is None else [
                {**(meta or {}), "text": text, "distance": d}
                for meta, text, d in zip(metas, documents, dist.tolist(), strict=True)]
            yield RankedColumns([str(d) for d in ids], -dist, list(documents)), metadata

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Columns per query (score = -distance, as :meth:`batch_retrieve`), no object per result; the metadatas
        stay in Chroma."""
        return [columns for columns, _ in self._ranked(queries, k, metadatas=False)]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The columns of :meth:`batch_retrieve_columns` as results, with Chroma's metadata, the text and the
        distance (Chroma's search and the metadata dicts run inside ``batch_to_results``)."""
        return RankedColumns.batch_to_results(self._ranked(queries, k, metadatas=True))

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "collection": self.collection.name, "embedding": str(self._vectors.label),
                "where": self.where, "where_document": self.where_document}


def index_corpus(
    client: Any,
    collection: str,
    corpus: str | Path | Iterable[dict[str, Any]],
    embedding: Any,
    space: str = "cosine",
    batch_size: int = 256,
    recreate: bool = False,
) -> int:
    """Create ``collection`` and add a corpus to it with embeddings computed here (never Chroma's default).

    For demos and tests: evaluation never indexes. ``corpus`` is a JSONL file or records ``{doc_id, text,
    metadata}``; nested metadata values are not kept (Chroma stores flat scalars). Returns the number of documents.
    """
    embed = resolve_embedder(embedding)
    existing = {c if isinstance(c, str) else c.name for c in client.list_collections()}
    if collection in existing:
        if not recreate:
            raise EvretError(f"chroma collection {collection!r} exists already; pass recreate=True to replace it")
        client.delete_collection(collection)
    target = client.create_collection(collection, embedding_function=None, configuration={"hnsw": {"space": space}})
    total = 0
    for batch in corpus_batches(corpus, batch_size):
        metadatas = [
            {k: v for k, v in (r.get("metadata") or {}).items() if isinstance(v, (str, int, float, bool))} or None
            for r in batch
        ]
        target.add(ids=[r["doc_id"] for r in batch], embeddings=embed([r["text"] for r in batch]),
                   documents=[r["text"] for r in batch], metadatas=metadatas)
        total += len(batch)
    return total
