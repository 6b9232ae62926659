"""evret-bm25's batch_retrieve against its peer, bare bm25s, on BEIR SciFact (../shared): the Evret wrapper's
overhead as a ratio: batch_retrieve_columns (the evaluator's path: ids, scores and texts as columns),
batch_retrieve (RetrievalResult objects with text), and the per-query loop.

    python benchmarks/bm25_batch.py [--k 100]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT / ".." / "shared" / "datasets" / "scifact"


def best_of(n: int, fn) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()
    import bm25s
    import Stemmer
    from evret_bm25.retriever import BM25Retriever, load_corpus

    corpus = load_corpus(SCIFACT / "corpus.jsonl")
    queries = [json.loads(line)["text"] for line in (SCIFACT / "queries.jsonl").read_text().splitlines() if line]
    evret = BM25Retriever(corpus)
    stemmer = Stemmer.Stemmer("english")
    texts = [f"{r['title']} {r['text']}".strip() for r in corpus.values()]
    peer = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    peer.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

    def bare() -> None:
        tokens = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, show_progress=False)
        peer.retrieve(tokens, k=args.k, show_progress=False)

    t_peer = best_of(3, bare)
    t_columns = best_of(3, lambda: evret.batch_retrieve_columns(queries, args.k))
    t_batch = best_of(3, lambda: evret.batch_retrieve(queries, args.k))
    t_loop = best_of(1, lambda: [evret.retrieve(q, args.k) for q in queries])
    print(f"SciFact: {len(corpus)} documents, {len(queries)} queries, k={args.k}")
    print("| what | seconds | ratio to bare bm25s |")
    print("|---|---|---|")
    print(f"| bm25s (bare: tokenize + retrieve, ids only) | {t_peer:.3f} | 1.00 |")
    print(f"| evret-bm25 batch_retrieve_columns (ids, scores, texts) | {t_columns:.3f} | {t_columns / t_peer:.2f} |")
    print(f"| evret-bm25 batch_retrieve (results with text) | {t_batch:.3f} | {t_batch / t_peer:.2f} |")
    print(f"| evret-bm25 retrieve, one query at a time | {t_loop:.3f} | {t_loop / t_peer:.2f} |")


if __name__ == "__main__":
    main()
