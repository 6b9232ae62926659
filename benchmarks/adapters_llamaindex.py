"""The ``llamaindex`` section of benchmarks/adapters.py: evret-llamaindex against the LlamaIndex retriever's own
``retrieve`` / ``aretrieve`` on an in-memory VectorStoreIndex."""

from __future__ import annotations

import asyncio
from typing import Any

from adapter_kit import OverheadTable, interleaved_best_of, scifact_records

# (documents, queries): LlamaIndex's in-memory vector store scores every document in Python for each query
# (~45 ms a query on all of SciFact), so the full corpus gets fewer queries, and a 500-document slice, where the
# store's own work per query is small and the adapter's cost shows, gets more
LLAMAINDEX_RUNS = ((None, 100), (500, 300))


def llamaindex_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int, repeat: int = 5) -> None:
    """A VectorStoreIndex over SciFact nodes whose embeddings are computed beforehand; its embedding model looks
    the query vectors up, so no model runs on either side. Peer A calls ``retriever.retrieve`` per query; peer B
    gathers ``retriever.aretrieve`` with 8 queries in flight, what the adapter does (its default
    ``max_concurrency``); the adapter's two paths are compared to B."""
    records = scifact_records()
    doc_vectors = embed([r["text"] for r in records])
    for n_docs, n_queries in LLAMAINDEX_RUNS:
        chosen = slice(0, n_docs)
        _llamaindex_run(records[chosen], doc_vectors[chosen], queries[:n_queries], vectors[:n_queries], k, repeat)


def _llamaindex_run(records: list[dict[str, Any]], doc_vectors: list[list[float]], queries: list[str],
                    vectors: list[list[float]], k: int, repeat: int) -> None:
    from evret_llamaindex import LlamaIndexRetriever
    from llama_index.core import VectorStoreIndex
    from llama_index.core import __version__ as llamaindex_version
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.schema import TextNode

    lookup = dict(zip(queries, vectors, strict=True))

    class LookupEmbedding(BaseEmbedding):
        """Query vectors computed beforehand; documents arrive embedded, so the text methods are never called."""

        def _get_query_embedding(self, query: str) -> list[float]:
            return lookup[query]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return lookup[query]

        def _get_text_embedding(self, text: str) -> list[float]:
            raise AssertionError("documents are embedded beforehand")

    nodes = [TextNode(id_=r["doc_id"], text=r["text"], metadata=r["metadata"], embedding=v)
             for r, v in zip(records, doc_vectors, strict=True)]
    index = VectorStoreIndex(nodes, embed_model=LookupEmbedding(model_name="lookup"))
    retriever = index.as_retriever(similarity_top_k=k)
    adapter = LlamaIndexRetriever(retriever)

    # the peers keep every answer, as a caller does (the adapter keeps what it returns)
    def direct_sync() -> list[Any]:
        return [retriever.retrieve(query) for query in queries]

    def direct_async() -> list[Any]:
        async def gather() -> list[Any]:
            gate = asyncio.Semaphore(adapter.max_concurrency)

            async def one(query: str) -> Any:
                async with gate:
                    return await retriever.aretrieve(query)

            return list(await asyncio.gather(*(one(q) for q in queries)))

        return asyncio.run(gather())

    assert list(adapter.batch_retrieve_columns(queries[:1], k)[0].ids) == [
        hit.node.node_id for hit in retriever.retrieve(queries[0])]
    times = interleaved_best_of(repeat, {
        "A": direct_sync,
        "B": direct_async,
        "columns": lambda: adapter.batch_retrieve_columns(queries, k),
        "results": lambda: adapter.batch_retrieve(queries, k),
    })
    table = OverheadTable(f"llamaindex: SciFact, {len(nodes)} documents, {len(queries)} queries, k={k}, "
                          f"llama-index-core {llamaindex_version}, VectorStoreIndex (SimpleVectorStore); best of "
                          f"{repeat}", len(queries))
    table.peer("A", "retriever.retrieve, one query after another", times["A"])
    table.peer("B", f"retriever.aretrieve gathered, {adapter.max_concurrency} in flight", times["B"])
    table.adapter("evret-llamaindex batch_retrieve_columns (ids, scores, texts)", times["columns"], "B")
    table.adapter("evret-llamaindex batch_retrieve (results with text and metadata)", times["results"], "B")
    table.print()
