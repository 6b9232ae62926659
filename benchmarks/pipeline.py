"""A 4-stage pipeline on SciFact evaluated in one run, against its stages evaluated as separate runs.

The pipeline of docs/pipelines.md: bm25 and dense (the packaged all-MiniLM-L6-v2) -> reciprocal rank fusion ->
the embedding reranker over the fused top 100 -> packing into a 4,000-token budget (~4 characters a token).

1. Per-stage nDCG@10 and recall@100 on the 300 test queries (id labels), with each stage's difference over the
   stages it reads, paired 95% bootstrap intervals and Holm-corrected t tests (``evaluate_pipeline``).
2. Cost: the pipeline evaluated in one run (``evaluate_pipeline``) against its stages evaluated as separate runs
   (each stage as the retriever it is on its own: bm25, dense, hybrid, rerank over hybrid, and the packed list of
   that rerank), and against one run of the final retriever alone (rerank over hybrid). Everything is warmed first
   (the dense corpus embeddings and the reranker's embedding cache), so the times compare the work of evaluation,
   not first encodes.
3. With ``--text``: the same on text labels (each query's expected answers are its gold abstracts' texts) judged by
   token-overlap: judgment contexts judged by the pipeline (each distinct one once) against the separate runs.

Usage: nice -n 10 python benchmarks/pipeline.py [--shared ../shared] [--text] [--budget 4000]
Prints Markdown for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from evret_core import EvaluationDataset, Evaluator, create_retriever
from evret_core.contracts.retrieve import RankedColumns
from evret_core.evaluation.stages import evaluate_pipeline, parse_pipeline, run_stages
from evret_core.retrieve.packing import pack, token_counter

REPO = Path(__file__).resolve().parents[1]
METRICS = ["ndcg@10", "recall@100"]
RERANKER = {"name": "embedding", "options": {"cache": True}}


def settings(budget: int) -> Any:
    return parse_pipeline({"stages": [
        {"name": "bm25", "retriever": "bm25"},
        {"name": "dense", "retriever": "dense"},
        {"name": "rrf", "fuse": ["bm25", "dense"], "method": "rrf"},
        {"name": "rerank", "reranker": RERANKER, "depth": 100},
        {"name": "packed", "pack": budget},
    ]}, "benchmark [pipeline]")


def text_labelled(dataset: EvaluationDataset) -> EvaluationDataset:
    from evret_core import QueryExample

    corpus = dataset.corpus or {}
    return EvaluationDataset(name=f"{dataset.name}-text", corpus=dataset.corpus, queries=[
        QueryExample(query_id=q.query_id, query_text=q.query_text,
                     expected_answers=[corpus[d]["text"] for d, grade in q.relevance.items() if grade > 0])
        for q in dataset.queries])


def separate_runs(dataset: EvaluationDataset, budget: int, judge: Any) -> tuple[float, float, int]:
    """Each stage evaluated as its own run (its retriever built and run from scratch); returns the total time,
    the time of the final retriever's run alone, and the judgment contexts judged in all."""
    hybrid = {"name": "hybrid", "options": {"method": "rrf", "depth": 100,
                                            "retrievers": [{"name": "bm25"}, {"name": "dense"}]}}
    total, final, contexts = 0.0, 0.0, 0
    for name, options in (("bm25", {}), ("dense", {}), ("hybrid", hybrid["options"]),
                          ("rerank", {"retriever": hybrid, "reranker": RERANKER, "depth": 100})):
        started = time.perf_counter()
        retriever = create_retriever(name, dataset=dataset, **options)
        results = Evaluator(retriever, METRICS, judge=judge, k=100).evaluate(dataset)
        elapsed = time.perf_counter() - started
        contexts += results.stats["judgments"]["unique"]
        total += elapsed
        if name == "rerank":
            final = elapsed
            print(f"  separate {name}: {elapsed:.1f} s", file=sys.stderr)
    # the packed list: the rerank retriever's ranking, packed, as a run of its own
    started = time.perf_counter()
    retriever = create_retriever("rerank", dataset=dataset, retriever=hybrid, reranker=RERANKER, depth=100)
    count = token_counter(None)
    ranked = retriever.batch_retrieve_columns([q.query_text for q in dataset.queries], 100)
    run = {q.query_id: RankedColumns.from_results(pack(r.to_results(), budget, count))
           for q, r in zip(dataset.queries, ranked, strict=True)}
    results = Evaluator(run, METRICS, judge=judge, k=100).evaluate(dataset)
    contexts += results.stats["judgments"]["unique"]
    total += time.perf_counter() - started
    return total, final, contexts


def table(data: dict[str, Any]) -> str:
    from evret_core.report.stage_report import pipeline_sections

    lines = []
    for section in pipeline_sections(data)[:2]:
        lines += [f"**{section.title}** ({section.note})", "", "| " + " | ".join(section.header) + " |",
                  "|" + "---|" * len(section.header)]
        lines += ["| " + " | ".join(row) + " |" for row in section.rows]
        lines.append("")
    for name, p in data["packing"].items():
        recall = p["recall"]["recall@100"]
        lines.append(f"Packing ({name}, budget {p['budget']} tokens, {p['tokenizer']}): {p['kept']:.2f} of "
                     f"{p['offered']:.2f} documents kept a query; recall@100 {recall['input']:.3f} -> "
                     f"{recall['packed']:.3f} ({recall['survives']:.1%} survives)")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(REPO.parent / "shared"))
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--text", action="store_true", help="also measure text labels judged by token-overlap")
    args = parser.parse_args()
    dataset = EvaluationDataset.load(str(Path(args.shared) / "datasets" / "scifact"))
    pipeline = settings(args.budget)
    started = time.perf_counter()
    run_stages(pipeline, dataset, 100)  # warm: dense corpus embeddings and the reranker's cache
    print(f"warm-up (all stages once): {time.perf_counter() - started:.1f} s", file=sys.stderr)
    cases = [("ids", dataset, None)] + ([("text, token-overlap", text_labelled(dataset), "token-overlap")]
                                        if args.text else [])
    for label, data, judge in cases:
        started = time.perf_counter()
        results = evaluate_pipeline(pipeline, data, METRICS, judge=judge)
        one_run = time.perf_counter() - started
        separate, final, contexts = separate_runs(data, args.budget, judge)
        print(f"\n### SciFact test, {label} ({len(data)} queries)\n")
        print(table(results.to_dict(per_query=False)))
        print(f"\nCost: the pipeline in one run {one_run:.1f} s (stages {results.timing['stages_s']:.1f} s, judging "
              f"{results.timing['judge_s']:.1f} s, metrics {results.timing['metrics_s']:.1f} s, comparisons "
              f"{results.timing['comparisons_s']:.1f} s); its 5 stages as separate runs {separate:.1f} s "
              f"({separate / one_run:.2f}x the pipeline); the final retriever (rerank over hybrid) alone {final:.1f} s "
              f"(the pipeline is {one_run / final:.2f}x one run). Judgment contexts judged: "
              f"{results.judging['distinct_contexts']} by the pipeline, {contexts} by the separate runs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
