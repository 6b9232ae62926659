"""Judges on human labels: how far each judge's numbers are from the truth, on real QA and retrieval data.

Cases (data from ../shared/datasets; see each PROVENANCE.md):

1. ``paragraphs``: the SQuAD 2.0 subset's answerable questions (386), corpus = its 83 paragraphs, BM25 top 10.
   Each question is one expected answer whose aliases are its distinct gold answer texts. Two truths for a
   retrieved paragraph: ``gold`` (it is the paragraph the question was written on: a human label) and
   ``containment`` (it contains a gold answer after SQuAD's official answer normalisation: lower case,
   punctuation and articles removed, whitespace collapsed; as whole tokens).
2. ``sentences``: the same questions over the paragraphs' sentences (1 sentence = 1 passage); the gold sentence is
   the one holding the first gold answer's ``answer_start`` offset. The harder, finer case.
3. ``scifact``: BEIR SciFact's test queries labelled by text (expected answers = the gold abstracts' texts), the
   BM25 top 100 judged; truth = the qrels ids. nDCG@10, R@100 and false matches (non-gold abstracts matched).

For cases 1 and 2: hit_rate@1, hit_rate@10 and MRR@10 through the Evaluator (first_match), the same measures of
each truth, judgment precision and recall against each truth over every (question, top-10 passage) pair, and
"no-evidence hits": first hits whose passage shares no answer token beyond the question's words (the question bias).

The semantic judge's score (``batch_score``) is swept over thresholds on cases 1 and 2 (``--sweep``), which is how
its default threshold was chosen. Embeddings are cached in SQLite (``--cache``), so a rerun encodes nothing.

Run: ``python benchmarks/judges.py [--cases paragraphs,sentences,scifact] [--judges ...] [--sweep]``
"""

from __future__ import annotations

import argparse
import re
import string
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evret_core import EvaluationDataset, Evaluator, QueryExample, create_judge, create_retriever
from evret_core.io.dataset_files import read_squad
from evret_core.judge import DEFAULT_JUDGE
from evret_core.judge.lexical import tokenize
from evret_core.plugins.registry import judge_names

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "datasets"
SWEEP = [0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.93, 0.94, 0.95, 0.97]
JUDGES = ["exact", "contains", "token-overlap", "token-overlap(query_boost=true)", "semantic"]
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset("st mr mrs ms dr mt jr sr no vs ca fig gen col lt capt rev prof".split())


# -- SQuAD's official answer normalisation (the containment truth), written from its published definition --------
def squad_normalize(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def squad_contains(passage: str, answers: Sequence[str]) -> bool:
    padded = f" {squad_normalize(passage)} "
    return any(a and f" {a} " in padded for a in (squad_normalize(x) for x in answers))


@dataclass
class Case:
    """A text-labelled dataset, its corpus and run, and the truths of each (query, retrieved doc) pair."""

    name: str
    dataset: EvaluationDataset
    corpus: dict[str, dict[str, Any]]
    run: dict[str, list[Any]]
    gold: dict[str, set[str]]
    truths: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # truth -> qid -> relevant doc ids


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """Sentence (start, end) offsets: a split at ". " + capital, except after an abbreviation or an initial."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        last = text[start : m.start()].split()[-1].rstrip(".").lower() if text[start : m.start()].split() else ""
        if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
            continue
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def squad_case(unit: str, shared: Path = SHARED, k: int = 10) -> Case:
    """Case 1 (``unit="paragraphs"``) or 2 (``unit="sentences"``) on the SQuAD 2.0 subset, read by Evret's one
    checked SQuAD reader (paragraph ids as ``evret rag`` gives them); passages are indexed without their title."""
    squad = read_squad(shared / "squad2" / "dev-v2.0-subset.json")
    corpus: dict[str, dict[str, Any]] = {}
    passages: dict[str, tuple[list[str], list[tuple[int, int]]]] = {}  # paragraph id -> passage ids, their spans
    for pid, paragraph in squad.corpus.items():
        context = paragraph["text"]
        spans = _sentence_spans(context) if unit == "sentences" else [(0, len(context))]
        ids = [pid if unit == "paragraphs" else f"{pid}s{s}" for s in range(len(spans))]
        for doc_id, (s, e) in zip(ids, spans, strict=True):
            corpus[doc_id] = {"title": "", "text": context[s:e].strip()}
        passages[pid] = (ids, spans)
    queries: list[QueryExample] = []
    gold: dict[str, set[str]] = {}
    for q in squad.questions:
        if q.impossible:
            continue
        ids, spans = passages[q.doc_id]
        offset = q.spans[0][1]
        where = next(i for i, (s, e) in enumerate(spans) if s <= offset < e or i == len(spans) - 1)
        queries.append(QueryExample.model_validate(  # one answer; its distinct gold texts are aliases
            {"query_id": q.question_id, "query_text": q.question,
             "expected_answers": [list(dict.fromkeys(text.strip() for text in q.answers))]}))
        gold[q.question_id] = {ids[where]}
    dataset = EvaluationDataset(queries=queries, name=f"squad2-{unit}")
    retriever = create_retriever("bm25", corpus=corpus)
    retrieved = Evaluator(retriever, metrics=[f"hit_rate@{k}"], k=k).retrieve(dataset)
    run = {q.query_id: list(r) for q, r in zip(queries, retrieved, strict=True)}
    case = Case(f"SQuAD 2.0 {unit}", dataset, corpus, run, gold)
    case.truths["gold"] = gold
    case.truths["containment"] = {
        q.query_id: {r.doc_id for r in run[q.query_id] if squad_contains(r.text or "", q.answer_aliases[0])}
        for q in queries
    }
    return case


def truth_scores(case: Case, truth: str, k: int = 10) -> dict[str, float]:
    """hit_rate@1, hit_rate@k and MRR@k of a truth over the case's run."""
    hit1 = hitk = mrr = 0.0
    for qid, results in case.run.items():
        relevant = case.truths[truth][qid]
        ranks = [i for i, r in enumerate(results[:k], start=1) if r.doc_id in relevant]
        hit1 += bool(ranks) and ranks[0] == 1
        hitk += bool(ranks)
        mrr += 1.0 / ranks[0] if ranks else 0.0
    n = len(case.run)
    return {"hit_rate@1": hit1 / n, f"hit_rate@{k}": hitk / n, f"mrr@{k}": mrr / n}


def build_judge(spec: str, cache: str | None) -> Any:
    name, _, opts = spec.partition("(")
    options: dict[str, Any] = dict(o.split("=", 1) for o in opts.rstrip(")").split(",") if o)
    if name == "semantic" and cache:
        options.setdefault("cache", cache)
    return create_judge(name, **options)


def specs(text: str) -> list[str]:
    """Judge specs from a comma-separated list; commas inside parentheses separate options."""
    return [s.strip() for s in re.split(r",(?![^(]*\))", text) if s.strip()]


def whole_passage_baseline(case: Case, threshold: float = 0.75, k: int = 10) -> str:
    """The semantic judge before windows: the canonical answer's embedding against the whole passage's, no
    verbatim shortcut. hit_rate@k at ``threshold``, and the median cosine with passages that contain the answer
    (containment truth) by answer length."""
    import numpy as np
    from evret_sentence_transformers import Encoder
    from evret_sentence_transformers.models import EmbeddingTable, paired_cosines

    table = EmbeddingTable()
    pairs = [(q, r) for q in case.dataset.queries for r in case.run[q.query_id][:k]]
    table.ensure([q.expected_answers[0] for q, _ in pairs] + [r.text or "" for _, r in pairs], Encoder())
    cos = paired_cosines(table.matrix, table.rows([q.expected_answers[0] for q, _ in pairs]),
                         table.rows([r.text or "" for _, r in pairs]))
    hits = {q.query_id for (q, _), c in zip(pairs, cos, strict=True) if c >= threshold}
    buckets: dict[str, list[float]] = {"1 word": [], "2-3 words": [], "4+ words": []}
    for (q, r), c in zip(pairs, cos, strict=True):
        if r.doc_id in case.truths["containment"][q.query_id]:
            n = len(q.expected_answers[0].split())
            buckets["1 word" if n == 1 else "2-3 words" if n <= 3 else "4+ words"].append(float(c))
    medians = ", ".join(f"{b}: {np.median(v):.2f} (n={len(v)})" for b, v in buckets.items() if v)
    return (f"whole-passage cosine, threshold {threshold}, no verbatim shortcut: hit_rate@{k} = "
            f"{len(hits) / len(case.dataset):.3f}; median cosine with a passage containing the answer: {medians}")


def judge_row(case: Case, spec: str, judge: Any, k: int = 10) -> dict[str, Any]:
    """One judge on a SQuAD case: its measures, and its judgments' precision/recall against each truth."""
    started = time.perf_counter()
    results = Evaluator(case.run, metrics=["hit_rate@1", f"hit_rate@{k}", f"mrr@{k}"], judge=judge,
                        k=k).evaluate(case.dataset)
    row: dict[str, Any] = {"judge": spec, **results.scores, "time_s": time.perf_counter() - started}
    no_evidence = first_hits = 0
    counts = {truth: [0, 0, 0] for truth in case.truths}  # tp, fp, fn
    for q in case.dataset.queries:
        qr = results.per_query[q.query_id]
        evidence = set().union(*(tokenize(a) for a in q.answer_aliases[0])) - tokenize(q.query_text)
        first = next((jd for jd in qr.judgments if jd.matched), None)
        if first is not None:
            first_hits += 1
            no_evidence += not (evidence & tokenize(first.text or ""))
        for jd in qr.judgments:
            for truth, c in counts.items():
                relevant = jd.doc_id in case.truths[truth][q.query_id]
                c[0] += bool(jd.matched) and relevant
                c[1] += bool(jd.matched) and not relevant
                c[2] += relevant and not jd.matched
    for truth, (tp, fp, fn) in counts.items():
        row[f"precision vs {truth}"] = tp / (tp + fp) if tp + fp else 1.0
        row[f"recall vs {truth}"] = tp / (tp + fn) if tp + fn else 1.0
    row["no-evidence hits"] = no_evidence / first_hits if first_hits else 0.0
    return row


def squad_table(case: Case, rows: list[dict[str, Any]], k: int = 10) -> str:
    cols = ["hit_rate@1", f"hit_rate@{k}", f"mrr@{k}"]
    truths = list(case.truths)
    head = ["judge", *cols] + [f"{m} vs {t}" for t in truths for m in ("P", "R")] + ["no-evidence hits", "time (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for truth in truths:
        s = truth_scores(case, truth, k)
        lines.append(f"| truth: {truth} | " + " | ".join(f"{s[c]:.3f}" for c in cols) + " |" + " - |" * (len(head) - 4))
    for row in rows:
        cells = [f"{row[c]:.3f}" for c in cols]
        cells += [f"{row[f'{m} vs {t}']:.3f}" for t in truths for m in ("precision", "recall")]
        lines.append(f"| {row['judge']} | " + " | ".join(cells) + f" | {row['no-evidence hits']:.1%} | "
                     f"{row['time_s']:.1f} |")
    return "\n".join(lines)


def threshold_sweep(case: Case, judge: Any, thresholds: Sequence[float], k: int = 10) -> str:
    """hit_rate@k, MRR@k and precision/recall vs containment of a scoring judge at each threshold (one scoring)."""
    contexts, owners = [], []
    for q in case.dataset.queries:
        for rank, r in enumerate(case.run[q.query_id][:k], start=1):
            contexts.append(q.judgment_context(0, r.text or ""))
            owners.append((q.query_id, rank, r.doc_id))
    judge.prepare(contexts)
    scores = judge.batch_score(contexts)
    contain = case.truths["containment"]
    lines = [f"| threshold | hit_rate@{k} | MRR@{k} | P vs containment | R vs containment |", "|---|---|---|---|---|"]
    truth = truth_scores(case, "containment", k)
    lines.append(f"| (containment truth) | {truth[f'hit_rate@{k}']:.3f} | {truth[f'mrr@{k}']:.3f} | - | - |")
    for t in thresholds:
        first: dict[str, int] = {}
        tp = fp = fn = 0
        for (qid, rank, doc), score in zip(owners, scores, strict=True):
            hit = score is not None and score >= t
            if hit and qid not in first:
                first[qid] = rank
            relevant = doc in contain[qid]
            tp += hit and relevant
            fp += hit and not relevant
            fn += relevant and not hit
        n = len(case.dataset)
        lines.append(f"| {t:.2f} | {len(first) / n:.3f} | {sum(1 / r for r in first.values()) / n:.3f} | "
                     f"{tp / (tp + fp) if tp + fp else 1:.3f} | {tp / (tp + fn) if tp + fn else 1:.3f} |")
    return "\n".join(lines)


def scifact_table(judges: list[str], cache: str | None, shared: Path = SHARED) -> str:
    dataset = EvaluationDataset.from_beir(shared / "scifact")
    corpus = dataset.corpus or {}
    text_dataset = EvaluationDataset(name="scifact-text", queries=[
        QueryExample(query_id=q.query_id, query_text=q.query_text,
                     expected_answers=[corpus[d]["text"] for d, g in q.relevance.items() if g > 0])
        for q in dataset.queries])
    retrieved = Evaluator(create_retriever("bm25", dataset=dataset), metrics=["recall@100"], k=100).retrieve(dataset)
    run = {q.query_id: r for q, r in zip(dataset.queries, retrieved, strict=True)}
    metrics = ["ndcg@10", "recall@100"]
    by_ids = Evaluator(run, metrics=metrics, k=100).evaluate(dataset).scores
    gold = {q.query_id: set(q.relevance) for q in dataset.queries}
    lines = ["| judge | nDCG@10 | R@100 | false matches | missed gold | time (s) |", "|---|---|---|---|---|---|",
             f"| ids (truth) | {by_ids['ndcg@10']:.4f} | {by_ids['recall@100']:.4f} | - | - | - |"]
    for spec in judges:
        started = time.perf_counter()
        results = Evaluator(run, metrics=metrics, judge=build_judge(spec, cache), k=100).evaluate(text_dataset)
        false = sum(bool(jd.matched) and jd.doc_id not in gold[qid]
                    for qid, qr in results.per_query.items() for jd in qr.judgments)
        missed = sum(jd.doc_id in gold[qid] and not jd.matched
                     for qid, qr in results.per_query.items() for jd in qr.judgments)
        s = results.scores
        lines.append(f"| {spec} | {s['ndcg@10']:.4f} ({s['ndcg@10'] - by_ids['ndcg@10']:+.4f}) | "
                     f"{s['recall@100']:.4f} ({s['recall@100'] - by_ids['recall@100']:+.4f}) | {false} | {missed} | "
                     f"{time.perf_counter() - started:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="paragraphs,sentences,scifact")
    parser.add_argument("--judges", default=",".join(JUDGES))
    parser.add_argument("--scifact-judges", default=None, help="judges for the SciFact case (default: --judges)")
    parser.add_argument("--sweep", action="store_true", help="sweep the semantic threshold on cases 1 and 2")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "evret" / "bench-embeddings.sqlite"),
                        help="SQLite embedding cache of the semantic judge ('' for none)")
    args = parser.parse_args(argv)
    installed = set(judge_names())
    judges = [j for j in specs(args.judges) if j.partition("(")[0] in installed]
    print(f"default judge: {DEFAULT_JUDGE}; judges: {', '.join(judges)}\n", flush=True)
    for unit in ("paragraphs", "sentences"):
        if unit not in args.cases:
            continue
        case = squad_case(unit)
        print(f"## {case.name}: {len(case.dataset)} questions, {len(case.corpus)} passages, BM25 top 10\n")
        rows = [judge_row(case, spec, build_judge(spec, args.cache)) for spec in judges]
        print(squad_table(case, rows) + "\n", flush=True)
        if args.sweep and "semantic" in installed:
            print(whole_passage_baseline(case) + "\n", flush=True)
            judge = build_judge("semantic", args.cache)
            print(threshold_sweep(case, judge, SWEEP) + "\n", flush=True)
    if "scifact" in args.cases:
        spec = specs(args.scifact_judges) if args.scifact_judges else judges
        print("## SciFact, text labels (gold abstract texts), BM25 top 100\n")
        print(scifact_table([j for j in spec if j.partition("(")[0] in installed], args.cache), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
