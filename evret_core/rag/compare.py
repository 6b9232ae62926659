"""RAG runs in ``evret compare`` and ``evret report``: paired tests between RAG runs, and a Markdown report.

Scores are compared under ``SECTION/METRIC`` names (``retrieval/recall@5``, ``gold/f1``, ``retrieved/correct``,
an adversarial condition's ``injection/correct``...): a metric is tested on the questions every run measured it
on (a score that does not apply to a question, such as the F1 of a refusal, is absent), with the paired test and
Holm-Bonferroni correction that retrieval comparisons use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.errors import EvretError
from evret_core.gates import FlatScores, rag_scores
from evret_core.rag.results import ATTRIBUTIONS, RagResults
from evret_core.stats import (
    TESTS,
    Comparison,
    PairComparison,
    cohens_d_paired,
    format_interval,
    holm_bonferroni,
    paired_p_value,
)

HEADLINE = ("retrieval/recall@5", "retrieval/mrr@10", "retrieval/ndcg@10")
GENERATION = ("exact", "f1", "correct", "refused", "wrong_refusal_rate", "correct_refusal_rate", "groundedness",
              "faithfulness", "citation_precision", "citation_recall", "answer_relevance")


def is_rag_file(path: str | Path) -> bool:
    """Whether ``path`` holds RAG results (``"schema": "evret-rag"`` among its first bytes)."""
    try:
        with Path(path).open("rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    return b'"evret-rag"' in head


def load_rag_runs(paths: Sequence[str | Path]) -> dict[str, RagResults]:
    """RAG results files by run name (the file name without suffix; repeated names get ``#1``, ``#2``)."""
    from evret_core.report.common import run_names

    return {name: RagResults.from_json(Path(p)) for name, p in zip(run_names(paths), paths, strict=True)}


def compare_rag(runs: Mapping[str, RagResults], test: str = "t", alpha: float = 0.05, n_resamples: int = 10000,
                seed: int = 0, top: int = 5) -> Comparison:
    """Every pair of runs on every score they share, paired over the questions measured in both."""
    if test not in TESTS:
        raise EvretError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if len(runs) < 2:
        raise EvretError("a comparison needs at least two runs")
    flat: dict[str, FlatScores] = {name: rag_scores(r) for name, r in runs.items()}
    names = list(flat)
    questions = [set(f.per_query) for f in flat.values()]
    if any(q != questions[0] for q in questions):
        raise EvretError("the RAG runs answer different questions; paired tests need the same question set")
    metrics = [m for m in flat[names[0]].scores if all(m in f.scores for f in flat.values())]
    pairs: list[PairComparison] = []
    for metric in metrics:
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                qids = [q for q in flat[a].per_query
                        if metric in flat[a].per_query[q] and metric in flat[b].per_query[q]]
                if len(qids) < 2:
                    continue
                x = np.array([flat[a].per_query[q][metric] for q in qids], dtype=np.float64)
                y = np.array([flat[b].per_query[q][metric] for q in qids], dtype=np.float64)
                diff = y - x
                order = np.argsort(diff, kind="stable")
                pairs.append(PairComparison(
                    metric=metric, a=a, b=b, delta=float(diff.mean()),
                    p_value=paired_p_value(x, y, test, n_resamples, seed), test=test,
                    effect_size=cohens_d_paired(x, y), n=len(qids),
                    gained=[{"query_id": qids[j], "delta": float(diff[j])} for j in order[::-1][:top] if diff[j] > 0],
                    lost=[{"query_id": qids[j], "delta": float(diff[j])} for j in order[:top] if diff[j] < 0]))
    for pair, adjusted in zip(pairs, holm_bonferroni([p.p_value for p in pairs]), strict=True):
        pair.p_adjusted = adjusted
        pair.significant = adjusted < alpha
    tested = list(dict.fromkeys(p.metric for p in pairs))
    return Comparison(runs=names, metrics=tested, test=test, alpha=alpha, query_ids=sorted(questions[0]),
                      pairs=pairs)


def flat_means(runs: Mapping[str, RagResults]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, list[float]]]]:
    """Each run's ``SECTION/METRIC`` means and intervals (for the comparison table)."""
    flat = {name: rag_scores(r) for name, r in runs.items()}
    return {n: f.scores for n, f in flat.items()}, {n: f.intervals for n, f in flat.items()}


def _cell(value: Any, interval: Sequence[float] | None = None) -> str:
    return "n/a" if value is None else format_interval(float(value), interval)


def rag_markdown(runs: Mapping[str, RagResults], comparison: Comparison | None = None) -> str:
    """A Markdown report of one or more RAG runs: retrieval, generation per condition, attribution, condition
    differences, slices by tag and condition, adversarial rates, and the comparison of runs when there are several."""
    lines: list[str] = ["# RAG evaluation", ""]
    for name, r in runs.items():
        level = f"{r.confidence_level:.0%} CI"
        lines += [f"## {name}", "", f"{len(r.per_question)} questions; conditions: {', '.join(r.conditions)}.", ""]
        if r.retrieval:
            lines += [f"### Retrieval (retrieved condition, {level})", "", "| metric | value |", "|---|---|"]
            lines += [f"| {m} | {_cell(v, r.retrieval_intervals.get(m))} |" for m, v in r.retrieval.items()]
            lines.append("")
        lines += [f"### Generation ({level})", "", "| metric | " + " | ".join(r.conditions) + " |",
                  "|---" * (len(r.conditions) + 1) + "|"]
        for metric in GENERATION:
            if not any(metric in r.generation.get(c, {}) for c in r.conditions):
                continue
            cells = [_cell(r.generation.get(c, {}).get(metric), r.generation_intervals.get(c, {}).get(metric))
                     for c in r.conditions]
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        lines.append("")
        if r.attribution:
            total = sum(r.attribution.values()) or 1
            lines += ["### Failure attribution", "", "| outcome | questions | share |", "|---|---|---|"]
            lines += [f"| {label} | {r.attribution.get(label, 0)} | {r.attribution.get(label, 0) / total:.1%} |"
                      for label in ATTRIBUTIONS]
            lines.append("")
        if r.differences:
            lines += ["### Differences between conditions (paired bootstrap)", "", "| b - a | metric | mean | n |",
                      "|---|---|---|---|"]
            lines += [f"| {d.b} - {d.a} | {d.metric} | {_cell(d.mean, d.interval)} | {d.n} |" for d in r.differences]
            lines.append("")
        for tag, values in r.slices.items():
            lines += [f"### Slices by {tag}", "", "| value | condition | " + " | ".join(("exact", "f1", "correct",
                                                                                         "refused")) + " |",
                      "|---|---|---|---|---|---|"]
            for value, by_condition in values.items():
                for condition, scores in by_condition.items():
                    cells = [_cell(scores.get(m)) for m in ("exact", "f1", "correct", "refused")]
                    lines.append(f"| {value} | {condition} | " + " | ".join(cells) + " |")
            lines.append("")
        for condition, entry in r.adversarial.items():
            lines += [f"### Adversarial: {condition} ({entry['family']}, n={entry.get('n', 0)})", "",
                      "| rate | value |", "|---|---|"]
            lines += [f"| {rate} | {_cell(v, entry['intervals'].get(rate))} |" for rate, v in entry["rates"].items()]
            drop = entry.get("drop") or {}
            if drop.get("n"):
                lines.append(f"| correct vs {entry['clean']} | {_cell(drop['delta'], drop['interval'])} |")
            lines.append("")
    if comparison is not None:
        lines += ["## Comparison", "", f"{comparison.test} test, Holm-Bonferroni over {len(comparison.pairs)} "
                  f"comparisons; * = adjusted p < {comparison.alpha:g}", "",
                  "| metric | pair | delta | n | p (adjusted) |", "|---|---|---|---|---|"]
        for p in comparison.pairs:
            mark = " *" if p.significant else ""
            lines.append(f"| {p.metric} | {p.b} vs {p.a} | {p.delta:+.4f} | {p.n} | {p.p_adjusted:.3g}{mark} |")
        lines.append("")
    return "\n".join(lines)
