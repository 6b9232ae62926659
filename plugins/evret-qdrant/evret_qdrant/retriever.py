"""Search an existing Qdrant collection as an Evret retriever; a helper indexes corpus files for demos and tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.sdk import (
    EvretError,
    RankedColumns,
    RetrievalResult,
    Retriever,
    batched,
    corpus_batches,
    resolve_embedder,
)

# point ids in Qdrant are integers or UUIDs: corpus ids are mapped to UUIDs and kept in the payload
ID_NAMESPACE = uuid.UUID("5b1d7b0e-6a43-4d5e-9a8a-2f0c2c7e4e61")


def point_id(doc_id: str) -> str:
    """The Qdrant point id that :func:`index_corpus` gives the document ``doc_id``."""
    return str(uuid.uuid5(ID_NAMESPACE, doc_id))


def _client(client: Any, location: str | None, url: str | None, path: str | None, api_key: str | None) -> Any:
    if client is not None:
        return client
    given = [name for name, value in (("location", location), ("url", url), ("path", path)) if value]
    if len(given) != 1:
        raise EvretError("qdrant retriever: give exactly one of the options 'client', 'location' (':memory:'), "
                         f"'url' or 'path' (got {', '.join(given) or 'none'})")
    from qdrant_client import QdrantClient

    return QdrantClient(location=location, url=url, path=path, api_key=api_key)


class QdrantRetriever(Retriever):
    """Queries an existing Qdrant collection; it never writes to it.

    The query is embedded with ``embedding`` (a function ``list[str] -> vectors``, a LangChain ``Embeddings``, or a
    sentence-transformers model name). The text is the payload field ``text_field``; the id is the payload field
    ``id_field`` when present, else the point id; the rest of the payload becomes metadata. ``filter`` (a Qdrant
    ``Filter`` or its dict form) and ``search_params`` are passed to every query; ``vector_name`` selects a named
    vector.
    """

    name = "qdrant"

    def __init__(
        self,
        collection: str,
        embedding: Any = None,
        client: Any = None,
        location: str | None = None,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        text_field: str = "text",
        id_field: str | None = "doc_id",
        filter: Any = None,
        vector_name: str | None = None,
        search_params: Any = None,
        batch_size: int = 64,
    ) -> None:
        from qdrant_client import models

        self.client = _client(client, location, url, path, api_key)
        self.collection = collection
        if not self.client.collection_exists(collection):
            existing = sorted(c.name for c in self.client.get_collections().collections)
            raise EvretError(f"qdrant retriever: option 'collection': no collection {collection!r} "
                             f"(existing: {', '.join(existing) or 'none'}); index it first, e.g. with "
                             f"evret_qdrant.index_corpus")
        self.embed = resolve_embedder(embedding)
        self.embedding_label = embedding if isinstance(embedding, str) else type(embedding).__name__
        self.text_field = text_field
        self.id_field = id_field
        try:
            self.filter = models.Filter.model_validate(filter) if isinstance(filter, dict) else filter
            self.search_params = (models.SearchParams.model_validate(search_params)
                                  if isinstance(search_params, dict) else search_params)
        except ValueError as exc:
            raise EvretError(f"qdrant retriever: option 'filter' or 'search_params' is invalid: {exc}") from None
        self.vector_name = vector_name
        self.batch_size = max(1, int(batch_size))

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def _responses(self, queries: Sequence[str], k: int,
                   payload: bool | list[str] = True) -> Iterator[tuple[str, list[Any]]]:
        """(query, scored points) per query, from one batch request per chunk of queries; ``payload`` is what of
        each point's payload to fetch (True: all of it; or the field names)."""
        from qdrant_client import models

        for chunk in batched(queries, self.batch_size):
            vectors = self.embed(chunk)
            requests = [
                models.QueryRequest(query=vector, limit=k, filter=self.filter, params=self.search_params,
                                    using=self.vector_name, with_payload=payload)
                for vector in vectors
            ]
            responses = self.client.query_batch_points(self.collection, requests=requests)
            for query, response in zip(chunk, responses, strict=True):
                yield query, list(response.points)

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Columns per query (ids, scores, texts from the payload), no object per result; only the text and id
        fields of the payload are fetched."""
        fields = [self.text_field, *([self.id_field] if self.id_field else [])]
        out: list[RankedColumns] = []
        for query, points in self._responses(queries, k, fields):
            ids, texts = [], []
            for rank, point in enumerate(points, 1):
                payload = point.payload or {}
                if self.text_field not in payload:  # the message lists the point's whole payload
                    whole = self.client.retrieve(self.collection, ids=[point.id], with_payload=True)
                    raise self._no_text(point, query, rank, whole[0].payload if whole else None)
                texts.append(payload[self.text_field])
                ids.append(str(payload[self.id_field] if self.id_field and self.id_field in payload else point.id))
            out.append(RankedColumns(ids, np.asarray([float(p.score) for p in points]), texts))
        return out

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        return [[self._result(point, query, rank) for rank, point in enumerate(points, 1)]
                for query, points in self._responses(queries, k)]

    def _no_text(self, point: Any, query: str, rank: int, payload: dict[str, Any] | None = None) -> EvretError:
        return EvretError(f"qdrant retriever: point {point.id} (rank {rank} for query {query[:60]!r}) has no "
                          f"payload field {self.text_field!r} (option 'text_field'); its payload fields are "
                          f"{sorted(payload if payload is not None else point.payload or {}) or 'none'}")

    def _result(self, point: Any, query: str, rank: int) -> RetrievalResult:
        payload = dict(point.payload or {})
        if self.text_field not in payload:
            raise self._no_text(point, query, rank)
        text = payload.pop(self.text_field)
        doc_id = payload.pop(self.id_field) if self.id_field and self.id_field in payload else point.id
        return RetrievalResult(doc_id=str(doc_id), score=float(point.score),
                               metadata={**payload, "text": text, "point_id": str(point.id)})

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "collection": self.collection, "embedding": str(self.embedding_label),
                "text_field": self.text_field, "id_field": self.id_field,
                "filter": None if self.filter is None else self.filter.model_dump(exclude_none=True),
                "vector_name": self.vector_name}


def index_corpus(
    client: Any,
    collection: str,
    corpus: str | Path | Iterable[dict[str, Any]],
    embedding: Any,
    text_field: str = "text",
    id_field: str = "doc_id",
    distance: str = "Cosine",
    batch_size: int = 256,
    recreate: bool = False,
) -> int:
    """Create ``collection`` and index a corpus into it (a JSONL file, or records ``{doc_id, text, metadata}``).

    For demos and tests: evaluation never indexes. The document's id is kept in the payload field ``id_field``
    and its text in ``text_field``; returns the number of points written.
    """
    from qdrant_client import models

    embed = resolve_embedder(embedding)
    if client.collection_exists(collection):
        if not recreate:
            raise EvretError(f"qdrant collection {collection!r} exists already; pass recreate=True to replace it")
        client.delete_collection(collection)
    try:
        metric = models.Distance[distance.upper()]
    except KeyError:
        raise EvretError(f"distance {distance!r}: use one of {', '.join(d.value for d in models.Distance)}") from None
    created = False
    total = 0
    for batch in corpus_batches(corpus, batch_size):
        vectors = embed([r["text"] for r in batch])
        if not created:
            client.create_collection(collection, vectors_config=models.VectorParams(size=len(vectors[0]),
                                                                                    distance=metric))
            created = True
        points = [
            models.PointStruct(id=point_id(r["doc_id"]), vector=v,
                               payload={**r.get("metadata", {}), id_field: r["doc_id"], text_field: r["text"]})
            for r, v in zip(batch, vectors, strict=True)
        ]
        client.upsert(collection, points=points)
        total += len(points)
    if not created:
        raise EvretError(f"index_corpus: the corpus for collection {collection!r} is empty")
    return total
