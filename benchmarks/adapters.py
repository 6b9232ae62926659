"""Retriever adapters against calling their backend directly, on the same queries in the same run: the adapter's
overhead as a ratio. Sections: ``lancedb`` (below) and one per file ``benchmarks/adapters_<name>.py`` holding a
function ``<name>_section`` (milvus, llamaindex, chroma, qdrant, langchain, ...), and ``haystack`` (evret-haystack
against calling the Haystack component's or pipeline's ``run`` directly) and ``opensearch`` (evret-opensearch against
opensearch-py's ``msearch`` on the plugin tests' wire-format stub server, in its own process) here; ``--only`` picks
some.

A section is a function ``<name>_section(queries, vectors, embed, k, repeat=5)`` that prints its table (``repeat``,
the best-of count, is optional). To add one, add a file ``adapters_<name>.py``: nothing here changes, so sections
added side by side never touch each other; a ``<name>_section`` function defined in this file is found too.

The corpus is BEIR SciFact (../shared), embedded once with the deterministic hashed embedder of
``evret_core.testing.vectorstore_kit``; query vectors are computed once and given to both sides (the adapter through
``query_embeddings`` or an embedder that looks them up), so the model's cost is out of the comparison and only the
adapter's work is measured.

    python benchmarks/adapters.py [--only lancedb,milvus] [--k 100] [--dim 256] [--queries N] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapter_kit import OverheadTable, interleaved_best_of
from bm25_batch import SCIFACT  # the benchmarks folder is on sys.path when a script runs


def lancedb_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int, repeat: int = 5) -> None:
    import lancedb
    from evret_lancedb import LanceDBRetriever, index_corpus

    with tempfile.TemporaryDirectory() as tmp:
        db = lancedb.connect(tmp)
        n_docs = index_corpus(db, "scifact", SCIFACT / "corpus.jsonl", embed, batch_size=2048)
        table = db.open_table("scifact")
        retriever = LanceDBRetriever("scifact", db=db, query_embeddings=dict(zip(queries, vectors, strict=True)))
        columns = ["doc_id", "text", *retriever.metadata_columns]
        batch = retriever.batch_size

        # the peers keep every answer, as a caller does (the adapter keeps what it returns)
        def direct_per_query() -> list[Any]:  # the obvious way: one search per query, answers as arrow tables
            return [table.search(v).select([*columns, "_distance"]).limit(k).to_arrow() for v in vectors]

        def direct_batched(select: list[str]) -> list[Any]:  # LanceDB's multi-vector search, the adapter's batch size
            return [table.search(vectors[i:i + batch]).select([*select, "_distance"]).limit(k).to_arrow()
                    for i in range(0, len(vectors), batch)]

        def direct_rows() -> list[Any]:  # the same search with LanceDB's own Python objects: one dict per row
            return [table.search(vectors[i:i + batch]).select([*columns, "_distance"]).limit(k).to_list()
                    for i in range(0, len(vectors), batch)]

        # same answers on both sides (the first query's ranking)
        direct_ids = table.search(vectors[0]).select(["doc_id", "_distance"]).limit(k).to_arrow().column("doc_id")
        assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == direct_ids.to_pylist()

        times = interleaved_best_of(repeat, {
            "A": lambda: direct_batched(["doc_id", "text"]),
            "columns": lambda: retriever.batch_retrieve_columns(queries, k),
            "B": lambda: direct_batched(columns),
            "results": lambda: retriever.batch_retrieve(queries, k),
            "C": direct_rows,
        })
        (t_query,) = interleaved_best_of(1, {"one": direct_per_query}).values()  # once: it is the slow one
    table = OverheadTable(f"lancedb: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, lancedb "
                          f"{lancedb.__version__}, no ANN index (exact scan); best of {repeat}", len(queries))
    table.peer("A", f"LanceDB multi-vector search, {batch} queries per call, id and text (to_arrow)", times["A"])
    table.adapter("evret-lancedb batch_retrieve_columns (ids, scores, texts)", times["columns"], "A")
    table.peer("B", "the same search, every column but the vector (to_arrow)", times["B"])
    table.adapter("evret-lancedb batch_retrieve (results with text and metadata)", times["results"], "B")
    table.peer("C", "the same search, every column but the vector, as LanceDB's Python rows (to_list)", times["C"])
    table.adapter("evret-lancedb batch_retrieve (results with text and metadata)", times["results"], "C")
    table.adapter("LanceDB search, one query at a time, every column (to_arrow; once)", t_query, "B")
    table.print()


def sections() -> dict[str, Callable[..., None]]:
    """Every ``<name>_section`` by name: those defined here first, then those of ``adapters_<name>.py`` files."""
    found = {name[:-len("_section")]: fn for name, fn in globals().items()
             if name.endswith("_section") and callable(fn)}
    for path in sorted(Path(__file__).resolve().parent.glob("adapters_*.py")):
        module = importlib.import_module(path.stem)
        for name, fn in vars(module).items():
            if name.endswith("_section") and callable(fn) and name[:-len("_section")] not in found:
                found[name[:-len("_section")]] = fn
    return found


def haystack_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int) -> None:
    """evret-haystack's ``batch_retrieve_columns`` (what the evaluator calls) against a loop calling the same
    object's ``run`` (peer A) and ``run_async`` (peer B) directly, on three objects over an InMemoryDocumentStore
    of SciFact and of its first 500 documents (where Haystack's own work per query is small, so the adapter's
    cost shows). The in-memory store scores every document in Python for each query, so each store size gets the
    number of queries in ``HAYSTACK_RUNS``. Timings are interleaved (one round of every variant, best of
    ``ROUNDS``), so a change in the machine's load hits them alike."""
    import os

    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no usage events from a benchmark
    from evret_core.io.corpus import read_corpus

    corpus = [(doc_id, f"{d['title']} {d['text']}".strip()) for doc_id, d in read_corpus(SCIFACT / "corpus.jsonl").items()]
    for n_docs, n_queries in HAYSTACK_RUNS:
        _haystack_run(corpus[:n_docs], queries[:n_queries], vectors[:n_queries], embed, k)


def _haystack_run(docs: list[tuple[str, str]], queries: list[str], vectors: list[list[float]], embed: Any,
                  k: int) -> None:
    import asyncio

    from evret_haystack import HaystackRetriever
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.version import __version__ as haystack_version

    store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    store.write_documents([Document(id=i, content=t, meta={"source": "scifact"}, embedding=v)
                           for (i, t), v in zip(docs, embed([t for _, t in docs]), strict=True)])
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store))
    # name -> (label, the object, its inputs for one query, adapter options)
    cases: dict[str, tuple[str, Any, Any, dict[str, Any]]] = {
        "bm25": ("InMemoryBM25Retriever", InMemoryBM25Retriever(store), lambda i: {"query": queries[i]}, {}),
        "dense": ("InMemoryEmbeddingRetriever (query vectors given)", InMemoryEmbeddingRetriever(store),
                  lambda i: {"query_embedding": vectors[i]},
                  {"query_embeddings": dict(zip(queries, vectors, strict=True))}),
        "pipeline": ("Pipeline(InMemoryBM25Retriever)", pipeline, lambda i: {"retriever": {"query": queries[i]}}, {}),
    }
    print(f"## haystack: SciFact, {len(docs)} documents, {len(queries)} queries, k={k}, "
          f"haystack-ai {haystack_version}, InMemoryDocumentStore, best of {ROUNDS} interleaved rounds")
    print("CPU seconds of the process (all its threads; the in-memory store is CPU-bound, and CPU time is what a "
          "shared machine's load disturbs least), wall seconds in brackets")
    print("| object | A: run() loop | B: run_async() loop | evret-haystack (run_async, 8 in flight) | to B "
          "| evret-haystack max_concurrency=1 (run) | to A |")
    print("|---|---|---|---|---|---|---|")
    for label, obj, inputs, options in cases.values():
        is_pipeline = isinstance(obj, Pipeline)

        def payload(i: int, obj: Any = obj, inputs: Any = inputs, is_pipeline: bool = is_pipeline) -> Any:
            data = inputs(i)
            if is_pipeline:
                data["retriever"]["top_k"] = k
            else:
                data["top_k"] = k
            return data

        def direct(obj: Any = obj, payload: Any = payload, is_pipeline: bool = is_pipeline) -> None:
            for i in range(len(queries)):
                obj.run(payload(i)) if is_pipeline else obj.run(**payload(i))

        async def direct_async(obj: Any = obj, payload: Any = payload, is_pipeline: bool = is_pipeline) -> None:
            for i in range(len(queries)):
                await (obj.run_async(payload(i)) if is_pipeline else obj.run_async(**payload(i)))

        fast = HaystackRetriever(obj, **options)
        sequential = HaystackRetriever(obj, max_concurrency=1, **options)
        # same answers on every side (the first query's ranking)
        first = obj.run(payload(0)) if is_pipeline else obj.run(**payload(0))
        ids = [d.id for d in (first["retriever"] if is_pipeline else first)["documents"]]
        assert ids == list(fast.batch_retrieve_columns(queries[:1], k)[0].ids)
        assert ids == list(sequential.batch_retrieve_columns(queries[:1], k)[0].ids)
        variants = [direct, lambda direct_async=direct_async: asyncio.run(direct_async()),
                    lambda fast=fast: fast.batch_retrieve_columns(queries, k),
                    lambda sequential=sequential: sequential.batch_retrieve_columns(queries, k)]
        timings = list(interleaved_best_of(ROUNDS, {str(n): fn for n, fn in enumerate(variants)}).values())
        cpu, wall = [timing.cpu for timing in timings], [timing.wall for timing in timings]
        a, b, fast, seq = (f"{c:.3f} ({w:.3f})" for c, w in zip(cpu, wall, strict=True))
        print(f"| {label} | {a} | {b} | {fast} | {cpu[2] / cpu[1]:.2f} ({wall[2] / wall[1]:.2f}) | {seq} | "
              f"{cpu[3] / cpu[0]:.2f} ({wall[3] / wall[0]:.2f}) |")


HAYSTACK_RUNS = ((None, 30), (500, 100))  # (documents: None for all of SciFact, queries)
ROUNDS = 3


def main() -> None:
    available = sections()
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", "--section", action="append", default=[],
                        help=f"sections to run, comma-separated or repeated (default all: {','.join(available)})")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--queries", type=int, default=0, help="use the first N queries (0: all)")
    parser.add_argument("--repeat", type=int, default=5, help="best of N timings per row")
    args = parser.parse_args()
    chosen = [name.strip() for given in args.only for name in given.split(",") if name.strip()] or list(available)
    unknown = [name for name in chosen if name not in available]
    if unknown:
        parser.error(f"--only: no section {', '.join(unknown)} (sections: {', '.join(available)})")
    from evret_core.testing.vectorstore_kit import hashed_embedder

    embed = hashed_embedder(args.dim)
    lines = (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = list(dict.fromkeys(json.loads(line)["text"] for line in lines if line))
    if args.queries:
        queries = queries[:args.queries]
    vectors = embed(queries)
    for name in chosen:
        section = available[name]
        takes_repeat = "repeat" in inspect.signature(section).parameters  # a section may keep its own count
        section(queries, vectors, embed, args.k, **({"repeat": args.repeat} if takes_repeat else {}))


def opensearch_section(queries: list[str], vectors: list[list[float]], embed: Any, k: int) -> None:
    """evret-opensearch against opensearch-py's own ``msearch`` with the same request bodies, batch size and
    server: the stub of plugins/evret-opensearch/tests in a child process (its work is in both sides' times)."""
    import os
    import subprocess
    import sys
    from functools import partial
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
        table = OverheadTable(f"opensearch: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, "
                              f"opensearch-py {__versionstr__}, against the wire-format stub server (one process, "
                              f"exact k-NN); CPU: this client process only", len(queries))
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
            # interleaved rounds, best of each: on a shared machine the load drifts between runs. Wall seconds
            # include the stub's work (the same on both sides); this process's CPU seconds leave it out, so their
            # ratio is the adapter's own work (and its garbage collection) against the client's
            times = interleaved_best_of(5, {
                "A": partial(direct, ["text"]),
                "columns": partial(retriever.batch_retrieve_columns, queries, k),
                "B": partial(direct, {"excludes": ["vector"]}),
                "results": partial(retriever.batch_retrieve, queries, k)})
            table.peer("A", f"{mode}: client.msearch, {batch} queries per request, text source", times["A"])
            table.adapter(f"{mode}: evret-opensearch batch_retrieve_columns", times["columns"], "A")
            table.peer("B", f"{mode}: client.msearch, every source field but the vector", times["B"])
            table.adapter(f"{mode}: evret-opensearch batch_retrieve (results with metadata)", times["results"], "B")
        table.print()
        client.close()
    finally:
        server.communicate("", timeout=30)


if __name__ == "__main__":
    main()
