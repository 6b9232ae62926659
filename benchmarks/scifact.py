"""SciFact (BEIR) on real data: reproduce published BM25 numbers, the dense retriever's, and measure the judges.

1. BM25 through the registered ``bm25`` retriever, against the published numbers in PROVENANCE.md.
2. The ``dense`` retriever (evret-sentence-transformers), when installed, with the offline all-MiniLM-L6-v2.
3. Text labels on real text: each query's expected answers are its gold abstracts' texts; the BM25 run is judged
   by the exact, token-overlap and semantic judges and compared with the id-based metrics (exact must equal them).

Usage: python benchmarks/scifact.py [--shared ../shared] [--skip-dense] [--judges exact,token-overlap,semantic]
Prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from evret_core import EvaluationDataset, Evaluator, QueryExample, create_judge, create_retriever
from evret_core.plugins.registry import judge_names, retriever_names

REPO = Path(__file__).resolve().parents[1]
METRICS = ["ndcg@10", "recall@10", "recall@100", "mrr@10"]
# (options, label, published nDCG@10, published R@100 or None, source)
BM25_VARIANTS: list[tuple[dict[str, Any], str, float, float | None, str]] = [
    ({}, "default: lucene, k1=0.9, b=0.4, flat title+text", 0.6789, 0.9253, "Anserini BEIR flat"),
    ({"k1": 1.2, "b": 0.75}, "lucene, k1=1.2, b=0.75", 0.680, None, "bm25s report, Lucene variant"),
    ({"k1": 1.5, "b": 0.75}, "lucene, k1=1.5, b=0.75", 0.687, None, "bm25s report, Lucene variant"),
]


def text_labelled(dataset: EvaluationDataset) -> EvaluationDataset:
    """The same queries labelled by text: each query's expected answers are its gold abstracts' texts."""
    corpus = dataset.corpus or {}
    return EvaluationDataset(name=f"{dataset.name}-text", corpus=dataset.corpus, queries=[
        QueryExample(query_id=q.query_id, query_text=q.query_text,
                     expected_answers=[corpus[d]["text"] for d, grade in q.relevance.items() if grade > 0])
        for q in dataset.queries
    ])


def bm25_section(dataset: EvaluationDataset) -> tuple[str, dict[str, Any]]:
    lines = ["| BM25 variant | nDCG@10 | published | diff | R@100 | published | build + run (s) |",
             "|---|---|---|---|---|---|---|"]
    default_run: dict[str, Any] = {}
    for options, label, ndcg, r100, source in BM25_VARIANTS:
        started = time.perf_counter()
        retriever = create_retriever("bm25", dataset=dataset, **options)
        retrieved = Evaluator(retriever, metrics=["recall@100"], k=100).retrieve(dataset)
        run = {q.query_id: results for q, results in zip(dataset.queries, retrieved, strict=True)}
        results = Evaluator(run, metrics=["ndcg@10", "recall@100"], k=100).evaluate(dataset)
        elapsed = time.perf_counter() - started
        got_n, got_r = results.scores["ndcg@10"], results.scores["recall@100"]
        lines.append(f"| {label} | {got_n:.4f} | {ndcg} ({source}) | {got_n - ndcg:+.4f} | {got_r:.4f} | "
                     f"{r100 if r100 is not None else '-'} | {elapsed:.1f} |")
        if not options:
            default_run = run
    return "\n".join(lines), default_run


def dense_section(dataset: EvaluationDataset) -> str:
    if "dense" not in retriever_names():
        return "(the `dense` retriever is not installed: pip install evret-sentence-transformers)"
    started = time.perf_counter()
    retriever = create_retriever("dense", dataset=dataset)  # the plugin's default: the offline all-MiniLM-L6-v2
    results = Evaluator(retriever, metrics=["ndcg@10", "recall@100"], k=100).evaluate(dataset)
    elapsed = time.perf_counter() - started
    return ("| dense retriever | nDCG@10 | R@100 | encode + run (s) |\n|---|---|---|---|\n"
            f"| all-MiniLM-L6-v2 (offline), cosine, title+text | {results.scores['ndcg@10']:.4f} | "
            f"{results.scores['recall@100']:.4f} | {elapsed:.1f} |")


def judge_section(dataset: EvaluationDataset, run: dict[str, Any], judges: list[str]) -> str:
    text_dataset = text_labelled(dataset)
    by_ids = Evaluator(run, metrics=METRICS, k=100).evaluate(dataset)
    gold = {q.query_id: set(q.relevance) for q in dataset.queries}
    lines = ["| judge | " + " | ".join(METRICS) + " | false matches | missed gold | judgments | time (s) |",
             "|---|" + "---|" * (len(METRICS) + 4),
             "| ids (reference) | " + " | ".join(f"{by_ids.scores[m]:.4f}" for m in METRICS) + " | - | - | - | - |"]
    for name in judges:
        if name not in judge_names():
            lines.append(f"| {name} | (judge not installed) |")
            continue
        started = time.perf_counter()
        results = Evaluator(run, metrics=METRICS, judge=create_judge(name), k=100).evaluate(text_dataset)
        elapsed = time.perf_counter() - started
        false_matches = missed = 0
        for qid, qr in results.per_query.items():
            for judgment in qr.judgments:
                is_gold = judgment.doc_id in gold[qid]
                false_matches += bool(judgment.matched) and not is_gold
                missed += is_gold and not judgment.matched
        cells = [f"{results.scores[m]:.4f} ({results.scores[m] - by_ids.scores[m]:+.4f})" for m in METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {false_matches} | {missed} | "
                     f"{results.stats['judgments']['unique']} | {elapsed:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(REPO.parent / "shared"), help="the shared data folder")
    parser.add_argument("--skip-dense", action="store_true")
    parser.add_argument("--judges", default="exact,token-overlap,semantic")
    args = parser.parse_args(argv)
    folder = Path(args.shared) / "datasets" / "scifact"
    dataset = EvaluationDataset.from_beir(folder)  # type: ignore[attr-defined]
    print(f"SciFact test split: {len(dataset)} queries, {len(dataset.corpus or {})} abstracts\n")
    table, run = bm25_section(dataset)
    print(table + "\n")
    if not args.skip_dense:
        print(dense_section(dataset) + "\n")
    print(judge_section(dataset, run, [j for j in args.judges.split(",") if j]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
