"""The ``milvus`` section of benchmarks/adapters.py: evret-milvus against ``MilvusClient.search`` on Milvus Lite."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from adapter_kit import OverheadTable, interleaved_best_of
from bm25_batch import SCIFACT


def milvus_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int, repeat: int = 5) -> None:
    """Milvus Lite (in process, a .db file in a temporary directory), the collection made by evret_milvus's
    ``index_corpus`` (COSINE, AUTOINDEX). Peer A asks for what ``batch_retrieve_columns`` returns (id, distance,
    text); peer B for every field and reads each hit once, which is when pymilvus decodes the dynamic (JSON)
    fields it returns lazily; both send the adapter's batch of query vectors per ``search`` call. Milvus Lite
    serves from a thread of this process, so the CPU columns count its work too. (One query per call, the obvious loop, measured 26x peer B once on a loaded machine: it is left out, being slow.)"""
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # Milvus Lite's server logs GOAWAY lines at exit otherwise
    import pymilvus
    from evret_milvus import MilvusRetriever, index_corpus
    from pymilvus import MilvusClient

    lookup = dict(zip(queries, vectors, strict=True))
    with tempfile.TemporaryDirectory() as tmp:
        client = MilvusClient(os.path.join(tmp, "scifact.db"))
        try:
            n_docs = index_corpus(client, "scifact", SCIFACT / "corpus.jsonl", embed, batch_size=2048)
            retriever = MilvusRetriever("scifact", embedding=lambda texts: [lookup[t] for t in texts], client=client)
            batch, every = retriever.batch_size, retriever.output_fields

            def direct(fields: list[str], read: bool) -> list[Any]:  # every answer kept, as a caller does
                answers = []
                for i in range(0, len(vectors), batch):
                    answer = client.search("scifact", data=vectors[i:i + batch], limit=k, output_fields=fields)
                    if read:
                        for hits in answer:
                            for _hit in hits:
                                pass
                    answers.append(answer)
                return answers

            first = client.search("scifact", data=vectors[:1], limit=k, output_fields=["text"])[0]
            assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == [h["doc_id"] for h in first]

            times = interleaved_best_of(repeat, {
                "A": lambda: direct(["text"], read=False),
                "columns": lambda: retriever.batch_retrieve_columns(queries, k),
                "B": lambda: direct(every, read=True),
                "results": lambda: retriever.batch_retrieve(queries, k),
            })
        finally:
            client.close()
    table = OverheadTable(f"milvus: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, pymilvus "
                          f"{pymilvus.__version__}, Milvus Lite, COSINE, AUTOINDEX; best of {repeat}", len(queries))
    table.peer("A", f"MilvusClient.search, {batch} queries per call, output_fields=['text']", times["A"])
    table.adapter("evret-milvus batch_retrieve_columns (ids, scores, texts)", times["columns"], "A")
    table.peer("B", f"the same search, output_fields={every}, each hit read once", times["B"])
    table.adapter("evret-milvus batch_retrieve (results with text and metadata)", times["results"], "B")
    table.print()
