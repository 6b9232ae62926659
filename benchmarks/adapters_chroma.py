"""The ``chroma`` section of benchmarks/adapters.py: evret-chroma against ``Collection.query`` on an in-memory
Chroma client."""

from __future__ import annotations

from typing import Any

from adapter_kit import OverheadTable, interleaved_best_of
from bm25_batch import SCIFACT


def chroma_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int, repeat: int = 5) -> None:
    """An ephemeral (in-memory) Chroma client, the collection made by evret_chroma's ``index_corpus`` (cosine HNSW).
    Peer A asks for what ``batch_retrieve_columns`` returns (ids, documents, distances), peer B for the metadatas
    too; both send the adapter's batch of query embeddings per ``query`` call."""
    import chromadb
    from evret_chroma import ChromaRetriever, index_corpus
    from evret_chroma.retriever import make_client

    client = make_client()
    n_docs = index_corpus(client, "scifact", SCIFACT / "corpus.jsonl", embed, batch_size=2048, recreate=True)
    collection = client.get_collection("scifact")
    retriever = ChromaRetriever("scifact", query_embeddings=dict(zip(queries, vectors, strict=True)), client=client)
    batch = retriever.batch_size

    def direct(include: list[str]) -> list[Any]:  # every answer kept, as a caller does (the adapter keeps its own)
        return [collection.query(query_embeddings=vectors[i:i + batch], n_results=k, include=include)  # type: ignore[arg-type]
                for i in range(0, len(vectors), batch)]

    first = collection.query(query_embeddings=vectors[:1], n_results=k, include=[])["ids"][0]  # type: ignore[arg-type]
    assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == first
    times = interleaved_best_of(repeat, {
        "A": lambda: direct(["documents", "distances"]),
        "columns": lambda: retriever.batch_retrieve_columns(queries, k),
        "B": lambda: direct(["documents", "metadatas", "distances"]),
        "results": lambda: retriever.batch_retrieve(queries, k),
    })
    table = OverheadTable(f"chroma: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, chromadb "
                          f"{chromadb.__version__}, EphemeralClient, cosine HNSW; best of {repeat}", len(queries))
    table.peer("A", f"Collection.query, {batch} embeddings per call, documents and distances", times["A"])
    table.adapter("evret-chroma batch_retrieve_columns (ids, scores, texts)", times["columns"], "A")
    table.peer("B", "the same query, metadatas too", times["B"])
    table.adapter("evret-chroma batch_retrieve (results with text and metadata)", times["results"], "B")
    table.print()
