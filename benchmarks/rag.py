"""The RAG harness on real data: the SQuAD 2.0 subset with bm25 and the offline extractive generator.

Answers every question under the gold context (its paragraph) and the retrieved context (bm25 top 5 over the 83
paragraphs), and prints, as Markdown tables for docs/benchmarks.md: retrieval, official-style EM and F1 (HasAns,
NoAns, overall; percentages like the official script), refusal rates, the failure attribution, and the paired
differences. Peers measured in the same run: the trivial generators that always refuse and never refuse (threshold
0), which bound what refusing alone can score; and the claim scores of the extractive generator's paraphrase mode
beside its default span mode. tests/rag/test_squad_benchmark.py checks the recorded numbers.

Usage: python benchmarks/rag.py [--shared ../shared] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from evret_core import create_retriever
from evret_core.rag import Answer, QuestionSet, RagEvaluator, RagResults

REPO = Path(__file__).resolve().parents[1]
SQUAD = Path("datasets") / "squad2" / "dev-v2.0-subset.json"
ANSWER_ROWS = ("exact", "f1", "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1")
RATE_ROWS = ("refused", "wrong_refusal_rate", "correct_refusal_rate", "correct", "groundedness",
             "citation_precision")


def run(shared: Path, n_resamples: int = 1000, generator: Any = "extractive",
        options: dict[str, Any] | None = None) -> RagResults:
    questions = QuestionSet.load(shared / SQUAD)
    retriever = create_retriever("bm25", corpus=questions.corpus)
    evaluator = RagEvaluator(retriever, generator, generator_options=options, conditions=["gold", "retrieved"],
                             k=5, n_resamples=n_resamples, seed=0)
    return evaluator.evaluate(questions)


def answer_table(results: RagResults) -> str:
    rows = ["| measure | gold context | retrieved context (bm25 top 5) |", "|---|---|---|"]
    for metric in ANSWER_ROWS + RATE_ROWS:
        cells = []
        for condition in ("gold", "retrieved"):
            value = results.generation[condition].get(metric)
            n = results.generation_n[condition].get(metric, 0)
            scale = 100.0 if metric in ANSWER_ROWS else 1.0
            cells.append("n/a" if value is None else f"{value * scale:.2f}" if scale == 100.0 else f"{value:.3f}")
            cells[-1] += f" (n={n})"
        rows.append(f"| {metric} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    results = run(args.shared, args.resamples)
    elapsed = time.perf_counter() - started
    print(f"SQuAD 2.0 subset: {len(results.per_question)} questions, {elapsed:.1f} s\n")
    print("retrieval (bm25, gold ids):", ", ".join(f"{m} {v:.4f}" for m, v in results.retrieval.items()), "\n")
    print(answer_table(results), "\n")
    print("| attribution | questions |\n|---|---|")
    for label, count in results.attribution.items():
        print(f"| {label} | {count} |")
    print("\n| retrieved - gold | mean | 95% CI |\n|---|---|---|")
    for d in results.differences:
        print(f"| {d.metric} | {d.mean:+.4f} | [{d.interval[0]:+.4f}, {d.interval[1]:+.4f}] |")
    print("\npeers in the same run (gold / retrieved; EM, F1 in %):")
    peers = {
        "extractive (threshold 0.5)": results,
        "never refuses (threshold 0)": run(args.shared, 10, options={"threshold": 0.0}),
        "always refuses": run(args.shared, 10, generator=lambda question, contexts: Answer(refused=True)),
    }
    print("| generator | EM gold | F1 gold | EM retrieved | F1 retrieved |\n|---|---|---|---|---|")
    for name, r in peers.items():
        g, t = r.generation["gold"], r.generation["retrieved"]
        print(f"| {name} | {100 * (g['exact'] or 0):.2f} | {100 * (g['f1'] or 0):.2f} | "
              f"{100 * (t['exact'] or 0):.2f} | {100 * (t['f1'] or 0):.2f} |")
    print("\nclaims: the extractive claim copies a context sentence; the paraphrase baseline restates the question "
          "with the span and cites the runner-up context too (gold / retrieved):")
    print("| answer mode | groundedness | faithfulness | citation precision | citation recall |\n|---|---|---|---|---|")
    paraphrase = run(args.shared, 10, options={"answer": "paraphrase"})
    for name, r in (("span (default)", results), ("paraphrase", paraphrase)):
        cells = [" / ".join(f"{r.generation[c][m]:.3f}" for c in ("gold", "retrieved"))
                 for m in ("groundedness", "faithfulness", "citation_precision", "citation_recall")]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
