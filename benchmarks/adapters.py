"""Retriever adapters against calling their backend directly, on the same queries in the same run: the adapter's
overhead as a ratio. Sections: ``lancedb`` (below) and one per file ``benchmarks/adapters_<name>.py`` holding a
function ``<name>_section`` (milvus, llamaindex, chroma, qdrant, langchain, ...); ``--only`` picks some.

A section is a function ``<name>_section(queries, vectors, embed, k, repeat=5)`` that prints its table (``repeat``,
the best-of count, is optional). To add one, add a file ``adapters_<name>.py``: nothing here changes, so sections
added side by side never touch each other; a ``<name>_section`` function defined in this file is found too.

The corpus is BEIR SciFact (../shared), embedded once with the deterministic hashed embedder of
``evret_core.testing.vectorstores``; query vectors are computed once and given to both sides (the adapter through
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

        # same answers on both sides (the first query's ranking)
        direct_ids = table.search(vectors[0]).select(["doc_id", "_distance"]).limit(k).to_arrow().column("doc_id")
        assert list(retriever.batch_retrieve_columns(queries[:1], k)[0].ids) == direct_ids.to_pylist()

        times = interleaved_best_of(repeat, {
            "A": lambda: direct_batched(["doc_id", "text"]),
            "columns": lambda: retriever.batch_retrieve_columns(queries, k),
            "B": lambda: direct_batched(columns),
            "results": lambda: retriever.batch_retrieve(queries, k),
        })
        (t_query,) = interleaved_best_of(1, {"one": direct_per_query}).values()  # once: it is the slow one
    table = OverheadTable(f"lancedb: SciFact, {n_docs} documents, {len(queries)} queries, k={k}, lancedb "
                          f"{lancedb.__version__}, no ANN index (exact scan); best of {repeat}", len(queries))
    table.peer("A", f"LanceDB multi-vector search, {batch} queries per call, id and text (to_arrow)", times["A"])
    table.adapter("evret-lancedb batch_retrieve_columns (ids, scores, texts)", times["columns"], "A")
    table.peer("B", "the same search, every column but the vector (to_arrow)", times["B"])
    table.adapter("evret-lancedb batch_retrieve (results with text and metadata)", times["results"], "B")
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
    from evret_core.testing.vectorstores import hashed_embedder

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


if __name__ == "__main__":
    main()
