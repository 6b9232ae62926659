"""The ``langchain`` section of benchmarks/adapters.py: evret-langchain against the vector store's own
``similarity_search_with_score`` / ``asimilarity_search_with_score`` on LangChain's InMemoryVectorStore."""

from __future__ import annotations

import asyncio
from typing import Any

from adapter_kit import OverheadTable, interleaved_best_of, scifact_records

# (documents, queries): InMemoryVectorStore turns every stored vector into an array for each query (~50 ms a query
# on all of SciFact), so the full corpus gets fewer queries, and a 500-document slice more
LANGCHAIN_RUNS = ((None, 100), (500, 300))


def langchain_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int, repeat: int = 5) -> None:
    """An InMemoryVectorStore of SciFact whose Embeddings embeds documents with the benchmark's embedder and looks
    the query vectors up, so no model runs in the timings. Peer A calls ``similarity_search_with_score`` per query;
    peer B gathers ``asimilarity_search_with_score`` with 8 in flight, what the adapter does (its default
    ``max_concurrency``); the adapter's two paths are compared to B."""
    records = scifact_records()
    for n_docs, n_queries in LANGCHAIN_RUNS:
        _langchain_run(records[slice(0, n_docs)], queries[:n_queries], vectors[:n_queries], embed, k, repeat)


def _langchain_run(records: list[dict[str, Any]], queries: list[str], vectors: list[list[float]], embed: Any,
                   k: int, repeat: int) -> None:
    from evret_langchain import LangChainRetriever
    from langchain_core import __version__ as langchain_version
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    lookup = dict(zip(queries, vectors, strict=True))

    class LookupEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(v) for v in embed(texts)]

        def embed_query(self, text: str) -> list[float]:
            return lookup[text]

        async def aembed_query(self, text: str) -> list[float]:  # no thread hand-off for a dictionary look-up
            return lookup[text]

    store = InMemoryVectorStore(LookupEmbeddings())
    store.add_documents([Document(id=r["doc_id"], page_content=r["text"], metadata=r["metadata"]) for r in records])
    adapter = LangChainRetriever(store)

    # the peers keep every answer, as a caller does (the adapter keeps what it returns)
    def direct_sync() -> list[Any]:
        return [store.similarity_search_with_score(query, k=k) for query in queries]

    def direct_async() -> list[Any]:
        async def gather() -> list[Any]:
            gate = asyncio.Semaphore(adapter.max_concurrency)

            async def one(query: str) -> Any:
                async with gate:
                    return await store.asimilarity_search_with_score(query, k=k)

            return list(await asyncio.gather(*(one(q) for q in queries)))

        return asyncio.run(gather())

    assert list(adapter.batch_retrieve_columns(queries[:1], k)[0].ids) == [
        doc.id for doc, _ in store.similarity_search_with_score(queries[0], k=k)]
    times = interleaved_best_of(repeat, {
        "A": direct_sync,
        "B": direct_async,
        "columns": lambda: adapter.batch_retrieve_columns(queries, k),
        "results": lambda: adapter.batch_retrieve(queries, k),
    })
    table = OverheadTable(f"langchain: SciFact, {len(records)} documents, {len(queries)} queries, k={k}, "
                          f"langchain-core {langchain_version}, InMemoryVectorStore; best of {repeat}", len(queries))
    table.peer("A", "store.similarity_search_with_score, one query after another", times["A"])
    table.peer("B", f"store.asimilarity_search_with_score gathered, {adapter.max_concurrency} in flight", times["B"])
    table.adapter("evret-langchain batch_retrieve_columns (ids, scores, texts)", times["columns"], "B")
    table.adapter("evret-langchain batch_retrieve (results with text and metadata)", times["results"], "B")
    table.print()
