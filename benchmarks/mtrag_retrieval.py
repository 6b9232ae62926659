"""MTRAG retrieval per query form over the REDUCED corpus: the 1,488 passages a copy of MTRAG has text for
(against 49k-183k per domain upstream), 238 of the 777 judged turns, qrels limited to passages with text.

Each domain folder is read with ``read_mtrag`` (the reduced corpus of its domain), each scored turn is retrieved by
the ``bm25`` retriever (plugin defaults) under the query forms ``last_turn``, ``rewrite`` and ``full_history``
(``conversation/forms.py``, HistoryWindow defaults) through the single-question evaluator, one query per turn; the
per-turn rows of the four domains are pooled. Intervals are the per-query (per-turn) percentile bootstrap and the
paired tests of ``evret_core.statistics``, Holm-adjusted over the differences; turns of one conversation are not
independent, so these intervals are narrower than the conversation-clustered ones of the turn evaluator.

Usage: nice -n 10 python benchmarks/mtrag_retrieval.py [--shared ../shared] [--json /tmp/evret-bench/mtrag.json]
Prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from evret_core import EvaluationDataset, Evaluator, create_retriever
from evret_core.conversation.forms import HistoryWindow, form_texts
from evret_core.io.mtrag import DOMAINS, read_mtrag
from evret_core.statistics.inference import (
    bootstrap_interval,
    bootstrap_intervals,
    holm_bonferroni,
    paired_randomization_test,
    paired_t_test,
)

REPO = Path(__file__).resolve().parents[1]
FORMS = ["last_turn", "rewrite", "full_history"]
METRICS = ["ndcg@10", "recall@10"]
PUBLISHED = "BM25 nDCG@10 0.21 (last turn) -> 0.25 (rewrite), BGE-base 0.30 -> 0.38, on the whole corpora (upstream README)"


def domain_scores(folder: Path) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, Any]]:
    """form -> turn id -> metric -> value for one domain folder, and facts about the run."""
    dataset = read_mtrag(folder)
    labelled = dataset.labelled_turns()
    texts = form_texts([c for c in dataset.conversations], FORMS, HistoryWindow())
    corpus_only = EvaluationDataset(name=dataset.name, corpus={k: dict(v) for k, v in (dataset.corpus or {}).items()}, queries=[
        labelled[0][1].query(labelled[0][1].turn_id, labelled[0][1].user)])
    started = time.perf_counter()
    retriever = create_retriever("bm25", dataset=corpus_only)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for form in FORMS:
        queries = [turn.query(turn.turn_id, text) for _, turn in labelled
                   if (text := texts[form][turn.turn_id]) is not None]
        forms_dataset = EvaluationDataset(name=f"{dataset.name}-{form}", corpus=corpus_only.corpus, queries=queries)
        results = Evaluator(retriever, metrics=METRICS, k=10).evaluate(forms_dataset)
        out[form] = results.per_query_scores()
    facts = {"turns": len(labelled), "conversations": len({c.conversation_id for c, _ in labelled}),
             "passages": len(dataset.corpus or {}), "seconds": time.perf_counter() - started,
             "conversation_of": {t.turn_id: c.conversation_id for c, t in labelled}}
    return out, facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--json", type=Path, default=Path("/tmp/evret-bench/mtrag_retrieval.json"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    root = args.shared / "datasets" / "mtrag" / "retrieval_tasks"
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}; load {os.getloadavg()[0]:.2f}; command: nice -n 10 python "
          f"benchmarks/mtrag_retrieval.py --shared {args.shared}")
    pooled: dict[str, dict[str, dict[str, float]]] = {form: {} for form in FORMS}
    per_domain: dict[str, dict[str, float]] = {}
    facts: dict[str, dict[str, Any]] = {}
    conversation_of: dict[str, str] = {}
    for domain in DOMAINS:
        scores, facts[domain] = domain_scores(root / domain)
        conversation_of.update(facts[domain].pop("conversation_of"))
        per_domain[domain] = {form: float(np.mean([s["ndcg@10"] for s in scores[form].values()])) for form in FORMS}
        for form in FORMS:
            pooled[form].update(scores[form])
    turns = list(pooled["last_turn"])
    assert all(set(pooled[form]) == set(turns) for form in FORMS), "a form left a turn unmeasured"
    sizes = ", ".join(f"{d} {facts[d]['passages']}" for d in DOMAINS)
    print(f"\nReduced corpus: {sum(f['passages'] for f in facts.values()):,} passages ({sizes}); {len(turns)} "
          f"scored turns in "
          f"{len(set(conversation_of.values()))} conversations; BM25 index + 3 forms in "
          f"{sum(f['seconds'] for f in facts.values()):.2f} s")
    columns = {f"{form} {m}": [pooled[form][t][m] for t in turns] for form in FORMS for m in METRICS}
    intervals = bootstrap_intervals(columns, seed=args.seed)
    print("\n| BM25, reduced corpus | " + " | ".join(FORMS) + " |\n|---|" + "---|" * len(FORMS))
    for m in METRICS:
        cells = [f"{np.mean(columns[f'{f} {m}']):.3f} [{intervals[f'{f} {m}'][0]:.3f}, {intervals[f'{f} {m}'][1]:.3f}]"
                 for f in FORMS]
        print(f"| {m} (turn bootstrap 95%) | " + " | ".join(cells) + " |")
    rows: list[list[Any]] = []
    for m in METRICS:
        base = np.asarray(columns[f"last_turn {m}"])
        for form in FORMS[1:]:
            other = np.asarray(columns[f"{form} {m}"])
            diff = other - base
            low, high = bootstrap_interval(diff, seed=args.seed)
            rows.append([f"{m} {form} - last_turn", float(diff.mean()), low, high, paired_t_test(other, base),
                         paired_randomization_test(other, base, seed=args.seed)])
    adjusted = holm_bonferroni([r[5] for r in rows])
    print("\n| difference | mean | 95% interval (turns resampled) | p (paired t) | p (randomization) | "
          "p (randomization, Holm) |\n|---|---|---|---|---|---|")
    for row, holm in zip(rows, adjusted, strict=True):
        print(f"| {row[0]} | {row[1]:+.3f} | [{row[2]:+.3f}, {row[3]:+.3f}] | {row[4]:.2g} | {row[5]:.2g} | "
              f"{holm:.2g} |")
    print("\n| nDCG@10 by domain | " + " | ".join(FORMS) + " | turns |\n|---|" + "---|" * (len(FORMS) + 1))
    for domain in DOMAINS:
        print(f"| {domain} | " + " | ".join(f"{per_domain[domain][f]:.3f}" for f in FORMS)
              + f" | {facts[domain]['turns']} |")
    print(f"\nPublished reference point: {PUBLISHED}.")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"facts": facts, "per_domain_ndcg@10": per_domain,
                                     "means": {k: float(np.mean(v)) for k, v in columns.items()},
                                     "intervals": intervals, "differences": rows, "holm": adjusted}, indent=2))
    print(f"(written {args.json})")


if __name__ == "__main__":
    main()
