"""Build an OpenSearch index from a corpus file, for demos, tests and benchmarks: evaluation never indexes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evret_core.sdk import EvretError, corpus_batches, resolve_embedder


def index_corpus(
    client: Any,
    index: str,
    corpus: str | Path | Iterable[dict[str, Any]],
    embedding: Any = None,
    text_field: str = "text",
    vector_field: str = "vector",
    space_type: str = "cosinesimil",
    engine: str = "lucene",
    batch_size: int = 500,
    recreate: bool = False,
) -> int:
    """Create ``index`` with ``client`` (an ``opensearchpy.OpenSearch``) and index a corpus into it: a JSONL file,
    or records ``{doc_id, text, metadata}``.

    The document id is the ``_id`` and the keyword field ``doc_id``; the text is the text field ``text_field``
    (BM25); flat metadata (the title, ...) becomes fields by OpenSearch's dynamic mapping. With ``embedding``
    (anything the ``embedding`` option takes), each text is also embedded into the ``knn_vector`` field
    ``vector_field`` (an HNSW graph of ``engine`` in ``space_type``). The index is refreshed at the end, so a
    search sees every document. Returns the number of documents.
    """
    embed = resolve_embedder(embedding) if embedding is not None else None
    if client.indices.exists(index=index):
        if not recreate:
            raise EvretError(f"opensearch index {index!r} exists already; pass recreate=True to replace it")
        client.indices.delete(index=index)
    created, total = False, 0
    for batch in corpus_batches(corpus, batch_size):
        vectors = embed([r["text"] for r in batch]) if embed is not None else None
        if not created:
            properties: dict[str, Any] = {"doc_id": {"type": "keyword"}, text_field: {"type": "text"}}
            settings: dict[str, Any] = {"number_of_shards": 1}
            if vectors is not None:
                settings["knn"] = True
                properties[vector_field] = {"type": "knn_vector", "dimension": len(vectors[0]), "method": {
                    "name": "hnsw", "space_type": space_type, "engine": engine}}
            client.indices.create(index=index, body={"settings": {"index": settings},
                                                     "mappings": {"properties": properties}})
            created = True
        lines: list[dict[str, Any]] = []
        for i, record in enumerate(batch):
            source = {**(record.get("metadata") or {}), "doc_id": record["doc_id"], text_field: record["text"]}
            if vectors is not None:
                source[vector_field] = vectors[i]
            lines += [{"index": {"_index": index, "_id": record["doc_id"]}}, source]
        answer = client.bulk(body=lines)
        if answer.get("errors"):
            failed = next(item for item in answer["items"] if "error" in next(iter(item.values())))
            raise EvretError(f"index_corpus: OpenSearch refused a document of index {index!r}: {failed}")
        total += len(batch)
    if not created:
        raise EvretError(f"index_corpus: the corpus for index {index!r} is empty")
    client.indices.refresh(index=index)
    return total
