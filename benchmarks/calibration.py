"""Judge calibration on real data: the cascade judge's savings, and prediction-powered interval coverage.

1. ``cascade``: on SciFact (BM25 top 10 of the test queries; expected answers = the gold abstracts' texts; truth =
   the qrels) and the SQuAD 2.0 subset (answerable questions, corpus = its 83 paragraphs, BM25 top 10; expected
   answers = the gold answer strings as alternatives; truth = the gold paragraph), each judgment is a (query,
   retrieved document) pair. The expensive judge is ``semantic``; the cascade puts ``token-overlap`` (no query
   boost) before it with an uncertainty band. The band is chosen on a seeded half of the queries (the smallest
   share of semantic calls whose accuracy and kappa stay within 0.005 of semantic alone there) and the numbers are
   reported on the other half, where the real :class:`CascadeJudge` runs and counts its own calls.
2. ``ppi``: SciFact train + test queries (every query with qrels) form the population; per query, nDCG@10,
   recall@10 and MRR@10 by ids are the truth and by a text judge the cheap estimate. Each repetition draws 300
   queries with replacement, labels a random 50 / 100 / 200 of them, and checks whether the 95% prediction-powered
   interval, the judge-only bootstrap interval and the labels-only normal interval cover the population value.

Usage: python benchmarks/calibration.py [cascade|ppi|all] [--shared ../shared] [--reps 2000] [--cache DIR]
Prints Markdown tables for docs/benchmarks.md. Embeddings are cached (SQLite) under --cache.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from evret_core import EvaluationDataset, Evaluator, QueryExample, create_judge, create_retriever
from evret_core.calibration.agreement import agreement
from evret_core.calibration.calibrate import calibrate_judge
from evret_core.calibration.labels import LabelledJudgment, derive_labels
from evret_core.calibration.ppi import ppi_mean
from evret_core.contracts.judge import JudgmentContext
from evret_core.judge.cascade import CascadeJudge, Stage
from evret_core.judge.thresholds import judge_scores, judge_threshold

REPO = Path(__file__).resolve().parents[1]
LOWS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4)
HIGHS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


# -- data ----------------------------------------------------------------------------------------------------
def scifact(shared: Path, split: str) -> EvaluationDataset:
    return EvaluationDataset.from_beir(shared / "datasets" / "scifact", split=split)


def text_labelled(dataset: EvaluationDataset) -> EvaluationDataset:
    corpus = dataset.corpus or {}
    return EvaluationDataset(name=f"{dataset.name}-text", corpus=dataset.corpus, queries=[
        QueryExample(query_id=q.query_id, query_text=q.query_text,
                     expected_answers=[corpus[d]["text"] for d, g in q.relevance.items() if g > 0])
        for q in dataset.queries])


def squad(shared: Path) -> tuple[EvaluationDataset, dict[str, dict[str, float]]]:
    """Answerable questions as a text-labelled dataset over the 83 paragraphs, and qrels = gold paragraph."""
    data = json.loads((shared / "datasets" / "squad2" / "dev-v2.0-subset.json").read_text(encoding="utf-8"))
    corpus: dict[str, dict[str, Any]] = {}
    queries, qrels = [], {}
    for article in data["data"]:
        for i, para in enumerate(article["paragraphs"]):
            pid = f"{article['title']}-{i}"
            corpus[pid] = {"title": "", "text": para["context"]}
            for qa in para["qas"]:
                if qa.get("is_impossible"):
                    continue
                answers = list(dict.fromkeys(a["text"].strip() for a in qa["answers"] if a["text"].strip()))
                queries.append(QueryExample(query_id=qa["id"], query_text=qa["question"], expected_answers=answers))
                qrels[qa["id"]] = {pid: 1.0}
    return EvaluationDataset(queries=queries, corpus=corpus, name="squad2-answerable"), qrels


def bm25_top(dataset: EvaluationDataset, k: int) -> dict[str, list[tuple[str, str]]]:
    retriever = create_retriever("bm25", dataset=dataset)
    retrieved = Evaluator(retriever, metrics=[f"recall@{k}"], k=k).retrieve(dataset)
    return {q.query_id: [(r.doc_id, r.text or "") for r in results]
            for q, results in zip(dataset.queries, retrieved, strict=True)}


# -- cascade -------------------------------------------------------------------------------------------------
def contexts_of(labels: list[LabelledJudgment]) -> list[JudgmentContext]:
    seen: dict[JudgmentContext, None] = {}
    for item in labels:
        for c in item.contexts():
            seen.setdefault(c, None)
    return list(seen)


def unit_any(labels: list[LabelledJudgment], verdict: dict[JudgmentContext, bool | None]) -> np.ndarray:
    return np.array([any(verdict[c] is True for c in item.contexts()) for item in labels], dtype=bool)


def choose_band(labels: list[LabelledJudgment], overlap: dict[JudgmentContext, float],
                semantic: dict[JudgmentContext, bool]) -> tuple[tuple[float, float], float]:
    """The band with the fewest semantic calls whose accuracy and kappa stay within 0.005 of semantic alone."""
    truth = np.array([item.label for item in labels], dtype=bool)
    contexts = contexts_of(labels)
    alone = agreement(unit_any(labels, dict(semantic)), truth, n_resamples=1)
    best: tuple[float, tuple[float, float]] | None = None
    for low in LOWS:
        for high in HIGHS:
            if high < low:
                continue
            verdict: dict[JudgmentContext, bool | None] = {}
            calls = 0
            for c in contexts:
                s = overlap[c]
                if s < low:
                    verdict[c] = False
                elif s >= high:
                    verdict[c] = True
                else:
                    verdict[c] = semantic[c]
                    calls += 1
            got = agreement(unit_any(labels, verdict), truth, n_resamples=1)
            if got.accuracy >= alone.accuracy - 0.005 and got.kappa >= alone.kappa - 0.005:
                share = calls / len(contexts)
                if best is None or share < best[0]:
                    best = (share, (low, high))
    if best is None:
        return (0.0, 1.0), 1.0
    return best[1], best[0]


def cascade_case(name: str, labels: list[LabelledJudgment], semantic: Any, seed: int) -> str:
    """Rows for semantic alone, token-overlap alone and the cascade, at semantic's default threshold and at the
    threshold `calibrate` picks (best kappa) on the dev half; everything reported on the test half."""
    started = time.perf_counter()
    overlap_judge = create_judge("token-overlap", query_boost=False)
    contexts = contexts_of(labels)
    sem_scores: list[float | None] = []
    for start in range(0, len(contexts), 512):  # chunks, so the embedding cache grows as encoding goes
        sem_scores.extend(judge_scores(semantic, contexts[start:start + 512]))
    sem_score = dict(zip(contexts, sem_scores, strict=True))
    ov = dict(zip(contexts, judge_scores(overlap_judge, contexts), strict=True))
    overlap = {c: (0.0 if s is None else s) for c, s in ov.items()}
    qids = sorted({item.query_id for item in labels})
    rng = np.random.default_rng(seed)
    dev_ids = set(rng.choice(qids, size=len(qids) // 2, replace=False).tolist())
    dev = [item for item in labels if item.query_id in dev_ids]
    test = [item for item in labels if item.query_id not in dev_ids]
    truth = np.array([item.label for item in test], dtype=bool)
    test_contexts = contexts_of(test)
    default = judge_threshold(semantic)
    assert default is not None
    calibrated = calibrate_judge(semantic, dev, by="kappa", n_resamples=1).best
    assert calibrated is not None
    over = agreement(unit_any(test, {c: overlap[c] >= overlap_judge.overlap_ratio for c in contexts}), truth,
                     seed=seed)
    rows = [f"| {name} | token-overlap alone (no query boost) | {_cells(over)} | 0.000 | - |"]
    notes = []
    for how, threshold in (("default", default), ("calibrated on the dev half", calibrated["threshold"])):
        sem_verdict = {c: (s is not None and s >= threshold) for c, s in sem_score.items()}
        band, dev_share = choose_band(dev, overlap, sem_verdict)
        alone_units = unit_any(test, sem_verdict)
        alone = agreement(alone_units, truth, seed=seed)
        semantic.threshold = threshold
        cascade = CascadeJudge([Stage(overlap_judge, band=band), semantic])
        got_units = unit_any(test, dict(zip(test_contexts, cascade.batch_judge(test_contexts), strict=True)))
        got = agreement(got_units, truth, seed=seed)
        share = cascade.stats()["last_judge_calls"] / len(test_contexts)
        same = float(np.mean(got_units == alone_units))
        rows.append(f"| {name} | semantic alone, threshold {threshold:.3f} ({how}) | {_cells(alone)} | 1.000 | - |")
        rows.append(f"| {name} | cascade: token-overlap band [{band[0]}, {band[1]}) -> semantic {threshold:.3f} | "
                    f"{_cells(got)} | {share:.3f} | {same:.3f} |")
        notes.append(f"{name}, semantic {how}: cascade accuracy {got.accuracy - alone.accuracy:+.4f}, kappa "
                     f"{got.kappa - alone.kappa:+.4f} vs semantic alone; semantic called on {share:.1%} of "
                     f"{len(test_contexts)} judgments (dev half: {dev_share:.1%})")
    semantic.threshold = default
    notes.append(f"{name}: {len(test)} test pairs ({truth.sum()} true), {len(dev)} dev pairs; "
                 f"{time.perf_counter() - started:.0f} s")
    return "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def _cells(a: Any) -> str:
    low, high = a.kappa_interval
    return f"{a.accuracy:.4f} | {a.kappa:.3f} [{low:.3f}, {high:.3f}] | {a.f1:.3f}"


def cascade_section(shared: Path, cache: Path, seed: int, queries: int | None) -> str:
    semantic = create_judge("semantic", cache=str(cache / "embeddings.sqlite"))
    out = ["| data | judge | accuracy | kappa [95% CI] | F1 | semantic calls / judgments | same verdict as "
           "semantic alone |", "|---|---|---|---|---|---|---|"]
    notes = []
    sq, sq_qrels = squad(shared)
    sq_labels = derive_labels(sq, sq_qrels, bm25_top(sq, 10))
    table = cascade_case("SQuAD 2.0 subset", sq_labels, semantic, seed)
    print(table, flush=True)
    out.append(table.split("\n\n")[0])
    notes.append(table.split("\n\n")[1])
    sf = scifact(shared, "test")
    if queries:
        sf = EvaluationDataset(queries=sf.queries[:queries], corpus=sf.corpus, name=sf.name)
    sf_text = text_labelled(sf)
    sf_qrels = {q.query_id: q.relevance for q in sf.queries}
    sf_labels = derive_labels(sf_text, sf_qrels, bm25_top(sf, 10))
    table = cascade_case("SciFact test", sf_labels, semantic, seed)
    out.append(table.split("\n\n")[0])
    notes.append(table.split("\n\n")[1])
    return "\n".join(out) + "\n\n" + "".join(notes)


# -- prediction-powered coverage -----------------------------------------------------------------------------
PPI_METRICS = ["ndcg@10", "recall@10", "mrr@10"]


def per_query_values(shared: Path, judge: Any) -> tuple[np.ndarray, np.ndarray]:
    """(truth by ids, estimate by the text judge): queries x metrics, over SciFact train + test."""
    train, test = scifact(shared, "train"), scifact(shared, "test")
    population = EvaluationDataset(queries=train.queries + test.queries, corpus=test.corpus, name="scifact-all")
    retriever = create_retriever("bm25", dataset=population)
    retrieved = Evaluator(retriever, metrics=["recall@10"], k=10).retrieve(population)
    run = {q.query_id: r for q, r in zip(population.queries, retrieved, strict=True)}
    by_ids = Evaluator(run, metrics=PPI_METRICS, k=10).evaluate(population)
    by_text = Evaluator(run, metrics=PPI_METRICS, judge=judge, k=10).evaluate(text_labelled(population))
    qids = [q.query_id for q in population.queries]
    y = np.array([[by_ids.per_query[q].scores[m] for m in PPI_METRICS] for q in qids])
    f = np.array([[by_text.per_query[q].scores[m] for m in PPI_METRICS] for q in qids])
    return y, f


def coverage(y: np.ndarray, f: np.ndarray, reps: int, seed: int, sample: int = 300,
             labelled: tuple[int, ...] = (50, 100, 200), boot: int = 500) -> list[dict[str, Any]]:
    truth = y.mean(axis=0)
    rng = np.random.default_rng(seed)
    z = 1.959963984540054
    rows = []
    for m, metric in enumerate(PPI_METRICS):
        hits = {n: 0 for n in labelled}
        widths = {n: 0.0 for n in labelled}
        label_hits = {n: 0 for n in labelled}
        label_widths = {n: 0.0 for n in labelled}
        judge_hits = 0
        for _ in range(reps):
            idx = rng.integers(0, len(y), size=sample)
            fs, ys = f[idx, m], y[idx, m]
            means = fs[rng.integers(0, sample, size=(boot, sample))].mean(axis=1)
            low, high = np.percentile(means, [2.5, 97.5])
            judge_hits += bool(low <= truth[m] <= high)
            for n in labelled:
                pick = rng.choice(sample, size=n, replace=False)
                est = ppi_mean(fs, ys[pick], fs[pick])
                hits[n] += bool(est.interval[0] <= truth[m] <= est.interval[1])
                widths[n] += est.interval[1] - est.interval[0]
                half = z * ys[pick].std(ddof=1) / np.sqrt(n)
                label_hits[n] += bool(abs(ys[pick].mean() - truth[m]) <= half)
                label_widths[n] += 2 * half
        for n in labelled:
            rows.append({"metric": metric, "n": n, "ppi": hits[n] / reps, "ppi_width": widths[n] / reps,
                         "labels_only": label_hits[n] / reps, "labels_width": label_widths[n] / reps,
                         "judge_only": judge_hits / reps, "truth": float(truth[m]), "judged": float(f[:, m].mean())})
    return rows


def ppi_section(shared: Path, reps: int, seed: int) -> str:
    out = []
    for label, options in (("token-overlap (defaults)", {}),
                           ("token-overlap, loose (overlap_ratio 0.3, min_tokens 1)",
                            {"overlap_ratio": 0.3, "min_tokens": 1})):
        started = time.perf_counter()
        y, f = per_query_values(shared, create_judge("token-overlap", **options))
        rows = coverage(y, f, reps, seed)
        elapsed = time.perf_counter() - started
        out.append(f"Cheap judge: {label}; population {len(y)} queries; {reps} repetitions of 300 queries; "
                   f"{elapsed:.0f} s.\n")
        out.append("| metric | truth (ids) | judge-only mean | labelled n | PPI coverage | PPI width | "
                   "labels-only coverage | labels-only width | judge-only bootstrap coverage |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            out.append(f"| {r['metric']} | {r['truth']:.4f} | {r['judged']:.4f} | {r['n']} | {r['ppi']:.3f} | "
                       f"{r['ppi_width']:.4f} | {r['labels_only']:.3f} | {r['labels_width']:.4f} | "
                       f"{r['judge_only']:.3f} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", nargs="?", choices=["cascade", "ppi", "all"], default="all")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--reps", type=int, default=2000, help="repetitions of the coverage simulation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scifact-queries", type=int, default=None,
                        help="cascade: only the first N SciFact test queries (encoding is the slow part)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("EVRET_BENCH_CACHE", "/tmp/evret-bench")))
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.part in ("cascade", "all"):
        print(cascade_section(args.shared, args.cache, args.seed, args.scifact_queries), flush=True)
    if args.part in ("ppi", "all"):
        print(ppi_section(args.shared, args.reps, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
