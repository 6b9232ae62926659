"""Vector-store adapters against calling the store directly, on the same queries in the same run: the adapter's
overhead as a ratio. Sections: ``lancedb`` (evret-lancedb against LanceDB's own search), ``opensearch``
(evret-opensearch against opensearch-py's ``msearch`` on the same server: the wire-format stub of the plugin's tests,
in its own process, since no OpenSearch server can be installed here).

The corpus is BEIR SciFact (../shared), embedded once with the deterministic hashed embedder of
``evret_core.testing.vectorstore_kit``; query vectors are computed once and given to both sides (the adapter through
``query_embeddings``), so the model's cost is out of the comparison and only the adapter's work is measured.

    python benchmarks/adapters.py [--k 100] [--dim 256] [--queries 1109] [--section all|lancedb|opensearch]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from bm25_batch import SCIFACT, best_of  # the benchmarks folder is on sys.path when a script runs


def lancedb_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int) -> None:
    import lancedb
    from evret_lancedb import LanceDBRetriever, index_corpus

    with tempfile.TemporaryDirectory() as tmp:
        db = lancedb.connect(tmp)
        n_docs = index_corpus(db, "scifact", SCIFACT / "corpus.jsonl", embed, batch_size=2048)
        table = db.open_table("scifact")
        retriever = LanceDBRetriever("scifact", db=db, query_embeddings=dict(zip(queries, vectors, strict=True)))
        columns = ["doc_id", "text", *retriever.metadata_columns]
        batch = retriever.batch_size

        def direct_per_query() -> None:  # the obvious way: one search per query, answers as arrow tables
            for v in vectors:
                table.search(v).select(columns).limit(k).to_arrow()

        def direct_batched(select: list[str]) -> None:  # LanceDB's multi-vector search, the adapter's batch size
            for i in range(0, len(vectors), batch):
                table.search(vectors[i:i + batch]).select(select).limit(k).to_arrow()

        # same answers on both sides (the first query's ranking)
        direct_ids = table.search(vectors[0]).select(columns).limit(k).to_arrow().column("doc_id").to_pylist()
        assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == direct_ids

        t_query = best_of(1, direct_per_query)
        t_ids = best_of(5, lambda: direct_batched(["doc_id", "text"]))
        t_columns = best_of(5, lambda: retriever.batch_retrieve_columns(queries, k))
        t_all = best_of(5, lambda: direct_batched(columns))
        t_results = best_of(5, lambda: retriever.batch_retrieve(queries, k))
        print(f"## lancedb: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, "
              f"lancedb {lancedb.__version__}, no ANN index (exact scan)")
        print("| what | seconds | ratio to its direct peer |")
        print("|---|---|---|")
        print(f"| peer A: LanceDB multi-vector search, {batch} queries per call, id and text (to_arrow) | "
              f"{t_ids:.3f} | 1.00 |")
        print(f"| evret-lancedb batch_retrieve_columns (ids, scores, texts) | {t_columns:.3f} | "
              f"{t_columns / t_ids:.2f} (to A) |")
        print(f"| peer B: the same search, every column but the vector (to_arrow) | {t_all:.3f} | 1.00 |")
        print(f"| evret-lancedb batch_retrieve (results with text and metadata) | {t_results:.3f} | "
              f"{t_results / t_all:.2f} (to B) |")
        print(f"| LanceDB search, one query at a time, every column (to_arrow) | {t_query:.3f} | "
              f"{t_query / t_all:.2f} (to B) |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--queries", type=int, default=0, help="use the first N queries (0: all)")
    parser.add_argument("--section", choices=["all", "lancedb", "opensearch"], default="all")
    args = parser.parse_args()
    from evret_core.testing.vectorstore_kit import hashed_embedder

    embed = hashed_embedder(args.dim)
    lines = (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = list(dict.fromkeys(json.loads(line)["text"] for line in lines if line))
    if args.queries:
        queries = queries[:args.queries]
    if args.section in ("all", "lancedb"):
        lancedb_section(queries, embed(queries), embed, args.k)
    if args.section in ("all", "opensearch"):
        opensearch_section(queries, embed(queries), embed, args.k)


def opensearch_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int) -> None:
    """evret-opensearch against opensearch-py's own ``msearch`` with the same request bodies, batch size and
    server: the stub of plugins/evret-opensearch/tests in a child process (its work is in both sides' times)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from evret_opensearch import OpenSearchRetriever, index_corpus
    from opensearchpy import OpenSearch, __versionstr__

    stub = Path(__file__).resolve().parent.parent / "plugins" / "evret-opensearch" / "tests" / "opensearch_stub.py"
    # one BLAS thread: the stub's k-NN is one matrix-vector product per query, which BLAS's thread pool slows
    # down 20x on a busy machine
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    server = subprocess.Popen([sys.executable, str(stub)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        assert server.stdout is not None
        client = OpenSearch(hosts=[server.stdout.readline().strip()], timeout=120)
        n_docs = index_corpus(client, "scifact", SCIFACT / "corpus.jsonl", embed, batch_size=1000)
        given = dict(zip(queries, vectors, strict=True))
        print(f"## opensearch: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, opensearch-py "
              f"{__versionstr__}, against the wire-format stub server (one process, exact k-NN)")
        print("| what | seconds | ratio to its direct peer | adapter minus peer, ms per query |")
        print("|---|---|---|---|")
        for mode, options in (("bm25", {}), ("knn", {"query_embeddings": given})):
            retriever = OpenSearchRetriever("scifact", client=client, **options)  # type: ignore[arg-type]
            batch = retriever.batch_size

            def direct(source: Any, batch: int = batch, mode: str = mode) -> list[Any]:
                """msearch by hand: the same bodies, the hits as opensearch-py returns them."""
                answers = []
                for i in range(0, len(queries), batch):
                    body: list[dict[str, Any]] = []
                    for q, v in zip(queries[i:i + batch], vectors[i:i + batch], strict=True):
                        query = ({"knn": {"vector": {"vector": v, "k": k}}} if mode == "knn" else
                                 {"match": {"text": {"query": q}}})
                        body += [{}, {"size": k, "query": query, "_source": source, "track_total_hits": False}]
                    answers += [r["hits"]["hits"] for r in client.msearch(body=body, index="scifact")["responses"]]
                return answers

            first = direct(["text"])[0]  # same answers on both sides
            assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == [h["_id"] for h in first]
            # interleaved rounds, best of each: on a shared machine the load drifts between runs
            t_ids, t_columns, t_all, t_results = (min(times) for times in zip(*(
                [best_of(1, fn) for fn in (lambda: direct(["text"]),
                                           lambda r=retriever: r.batch_retrieve_columns(queries, k),
                                           lambda: direct({"excludes": ["vector"]}),
                                           lambda r=retriever: r.batch_retrieve(queries, k))]
                for _ in range(5)), strict=True))
            n = len(queries)
            print(f"| {mode} peer A: client.msearch, {batch} queries per request, text source | {t_ids:.3f} | 1.00 | |")
            print(f"| {mode}: evret-opensearch batch_retrieve_columns | {t_columns:.3f} | {t_columns / t_ids:.2f} "
                  f"(to A) | {(t_columns - t_ids) / n * 1000:.3f} |")
            print(f"| {mode} peer B: client.msearch, every source field but the vector | {t_all:.3f} | 1.00 | |")
            print(f"| {mode}: evret-opensearch batch_retrieve (results with metadata) | {t_results:.3f} | "
                  f"{t_results / t_all:.2f} (to B) | {(t_results - t_all) / n * 1000:.3f} |")
        client.close()
    finally:
        server.communicate("", timeout=30)


if __name__ == "__main__":
    main()
