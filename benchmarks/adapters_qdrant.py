"""The ``qdrant`` section of benchmarks/adapters.py: evret-qdrant against ``QdrantClient.query_batch_points`` in
qdrant-client's local mode (in memory)."""

from __future__ import annotations

from typing import Any

from adapter_kit import OverheadTable, interleaved_best_of
from bm25_batch import SCIFACT


def qdrant_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int, repeat: int = 5) -> None:
    """qdrant-client's local mode (``:memory:``, exact search in the client process), the collection made by
    evret_qdrant's ``index_corpus`` (cosine). Peer A asks for the payload fields ``batch_retrieve_columns`` reads
    (text and doc_id), peer B for the whole payload; both send the adapter's batch of queries per
    ``query_batch_points`` call."""
    from importlib.metadata import version

    from evret_qdrant import QdrantRetriever, index_corpus
    from qdrant_client import QdrantClient, models

    client = QdrantClient(location=":memory:")
    n_docs = index_corpus(client, "scifact", SCIFACT / "corpus.jsonl", embed, batch_size=2048)
    lookup = dict(zip(queries, vectors, strict=True))
    retriever = QdrantRetriever("scifact", embedding=lambda texts: [lookup[t] for t in texts], client=client)
    batch = retriever.batch_size

    def direct(payload: bool | list[str]) -> list[Any]:  # every answer kept, as a caller does
        return [client.query_batch_points("scifact", requests=[
            models.QueryRequest(query=v, limit=k, with_payload=payload) for v in vectors[i:i + batch]])
            for i in range(0, len(vectors), batch)]

    first = client.query_points("scifact", query=vectors[0], limit=k, with_payload=["doc_id"]).points
    assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == [p.payload["doc_id"] for p in first]
    times = interleaved_best_of(repeat, {
        "A": lambda: direct(["text", "doc_id"]),
        "columns": lambda: retriever.batch_retrieve_columns(queries, k),
        "B": lambda: direct(True),
        "results": lambda: retriever.batch_retrieve(queries, k),
    })
    table = OverheadTable(f"qdrant: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, qdrant-client "
                          f"{version('qdrant-client')}, local mode in memory, cosine; best of {repeat}", len(queries))
    table.peer("A", f"query_batch_points, {batch} queries per call, payload fields text and doc_id", times["A"])
    table.adapter("evret-qdrant batch_retrieve_columns (ids, scores, texts)", times["columns"], "A")
    table.peer("B", "the same requests, the whole payload", times["B"])
    table.adapter("evret-qdrant batch_retrieve (results with text and metadata)", times["results"], "B")
    table.print()
