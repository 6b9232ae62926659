"""Agreement of two qrels files (a reference, e.g. people's grades, and a judged one, e.g. an LLM's): at the label
level on the pairs judged in both, and at the leaderboard level on the system scores of runs under each.

Every figure has a percentile bootstrap interval over QUERIES: a resample is a multinomial count of each query
(B x Q), so the resampled confusions are ``w @ C`` (C: each query's K x K confusion) and the resampled system
means ``w @ M / Q`` (M: each query's metric values, Q x S, per qrels); every statistic runs on all B resamples
at once. The formulas are in docs/agreement.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.io.trec import read_qrels, read_run
from evret_core.metrics.engine import evaluate_run, resolve_metrics
from evret_core.statistics import grade_agreement as ga
from evret_core.statistics import rank_correlation as rc
from evret_core.statistics.inference import check_confidence_level, check_resamples

Qrels = Mapping[str, Mapping[str, float]]

DEFAULT_METRICS = ("ndcg@10", "precision@10", "ap@100")
_CELLS = 4_000_000


@dataclass
class PairTable:
    """The pairs judged in both qrels, as per-query confusion counts."""

    labels: list[float]
    queries: list[str]
    per_query: np.ndarray  # Q x K x K, rows reference, columns judged
    only_reference: int
    only_judged: int


def pair_table(reference: Qrels, judged: Qrels) -> PairTable:
    """Every (query, document) judged in both, counted per query into K x K confusions over the sorted union of
    the grades they carry; an EvretError when no pair is judged in both."""
    common: dict[str, list[tuple[float, float]]] = {}
    only_reference = only_judged = 0
    for qid, docs in reference.items():
        other = judged.get(qid, {})
        for doc, grade in docs.items():
            if doc in other:
                common.setdefault(qid, []).append((float(grade), float(other[doc])))
            else:
                only_reference += 1
    for qid, docs in judged.items():
        mine = reference.get(qid, {})
        only_judged += sum(1 for doc in docs if doc not in mine)
    if not common:
        raise EvretError("the two qrels files share no judged pair (no query id and document id judged in both)")
    labels = sorted({g for pairs in common.values() for pair in pairs for g in pair})
    index = {g: i for i, g in enumerate(labels)}
    queries = sorted(common)
    table = np.zeros((len(queries), len(labels), len(labels)), dtype=np.float64)
    for q, qid in enumerate(queries):
        for ref, jud in common[qid]:
            table[q, index[ref], index[jud]] += 1
    return PairTable(labels, queries, table, only_reference, only_judged)


def query_weights(n_queries: int, n_resamples: int, seed: int) -> np.ndarray:
    """B x Q: how many times each query is drawn in each resample (Q draws with replacement)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_queries, np.full(n_queries, 1.0 / n_queries), size=n_resamples).astype(np.float64)


def _figure(value: float, resampled: np.ndarray, level: float, reason: str) -> dict[str, Any]:
    """``{"value", "interval"}``; value and interval null, with ``reason``, where the statistic is undefined."""
    if not np.isfinite(value):
        return {"value": None, "interval": None, "reason": reason}
    finite = resampled[np.isfinite(resampled)]
    if not finite.size:
        return {"value": float(value), "interval": None, "reason": reason + " in every resample"}
    alpha = 1.0 - level
    low, high = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return {"value": float(value), "interval": [float(low), float(high)]}


def _number(grade: float) -> float | int:
    return int(grade) if float(grade).is_integer() else float(grade)


def label_agreement(table: PairTable, weights: np.ndarray, level: float) -> dict[str, Any]:
    """The label-level figures of ``table`` (point values from all queries once, intervals from ``weights``)."""
    point = table.per_query.sum(axis=0)
    k = len(table.labels)
    resampled = np.tensordot(weights, table.per_query, axes=(1, 0))  # B x K x K
    constant = "both raters gave one and the same grade to every pair (no variation to agree on)"

    def fig(fn: Any, *extra: Any) -> dict[str, Any]:
        return _figure(float(fn(point, *extra)), np.asarray(fn(resampled, *extra)), level, constant)

    binary: dict[str, Any] = {}
    cuts_point = ga.binary_confusions(point)
    cuts_resampled = ga.binary_confusions(resampled)
    for c in range(1, k):
        two = cuts_point[c - 1]
        binary[str(_number(table.labels[c]))] = {
            "kappa": _figure(float(ga.cohen_kappa(two)), ga.cohen_kappa(cuts_resampled[:, c - 1]), level, constant),
            "reference_positive": int(two[1].sum()),
            "judged_positive": int(two[:, 1].sum()),
            "confusion": {"tp": int(two[1, 1]), "fp": int(two[0, 1]), "fn": int(two[1, 0]), "tn": int(two[0, 0])},
        }
    return {
        "pairs": int(point.sum()),
        "queries": len(table.queries),
        "only_reference": table.only_reference,
        "only_judged": table.only_judged,
        "labels": [_number(g) for g in table.labels],
        "exact_agreement": fig(ga.exact_agreement),
        "cohen_kappa": fig(ga.cohen_kappa),
        "weighted_kappa": {"linear": fig(ga.weighted_kappa, "linear"),
                           "quadratic": fig(ga.weighted_kappa, "quadratic")},
        "krippendorff_alpha": fig(ga.krippendorff_alpha),
        "binary": binary,
        "confusion": {"labels": [_number(g) for g in table.labels], "rows": "reference", "columns": "judged",
                      "matrix": [[int(v) for v in row] for row in point]},
    }


def leaderboard_agreement(reference: np.ndarray, judged: np.ndarray, names: Sequence[str], weights: np.ndarray,
                          level: float) -> dict[str, Any]:
    """One metric's leaderboard figures from its per-query values (Q x S under each qrels)."""
    q = reference.shape[0]
    ref_point, jud_point = reference.mean(axis=0), judged.mean(axis=0)
    ref_b, jud_b = weights @ reference / q, weights @ judged / q
    tied = "every system has the same score under one of the qrels"

    # the statistics build S x S sign tables per resample: chunks of resamples keep that under ~32 MB a table
    rows = max(1, _CELLS // max(len(names) ** 2, 1))

    def fig(fn: Any) -> dict[str, Any]:
        resampled = np.concatenate([np.asarray(fn(ref_b[i:i + rows], jud_b[i:i + rows]), dtype=np.float64)
                                    for i in range(0, len(ref_b), rows)])
        return _figure(float(fn(ref_point, jud_point)), resampled, level, tied)

    return {
        "systems": [{"run": n, "reference": float(r), "judged": float(j)}
                    for n, r, j in zip(names, ref_point, jud_point, strict=True)],
        "kendall_tau": fig(rc.kendall_tau_b),
        "tau_ap": fig(rc.tau_ap),
        "spearman_rho": fig(rc.spearman_rho),
        "swap_rate": fig(rc.swap_rate),
        "ties": int(rc.tied_pairs(ref_point, jud_point)),
    }


def qrels_agreement(
    reference: Qrels,
    judged: Qrels,
    runs: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    relevance_level: float | None = None,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Both levels of agreement of ``judged`` with ``reference`` as one JSON-ready dict (keys in
    docs/agreement.md). ``runs`` (name -> TREC run, at least two) adds the leaderboard: each metric scored per
    query under each qrels over the queries with a pair judged in both (trec_eval -c: a query the run lacks
    scores 0), the system score their mean."""
    level = check_confidence_level(confidence_level)
    n_resamples = check_resamples(n_resamples, "--n-resamples")
    resolved = resolve_metrics(list(metrics))
    if runs is not None and len(runs) < 2:
        raise EvretError(f"a leaderboard needs at least 2 runs, got {len(runs)}")
    table = pair_table(reference, judged)
    if runs is not None:
        wanted = set(table.queries)
        for name, run in runs.items():
            if not any(q in wanted for q in run):
                raise EvretError(f"run {name!r} has none of the {len(wanted)} queries judged in both qrels files")
    weights = query_weights(len(table.queries), n_resamples, seed)
    out = label_agreement(table, weights, level)
    leaderboard: dict[str, Any] | None = None
    if runs is not None:
        names = list(runs)
        ref_q = {q: reference[q] for q in table.queries}
        jud_q = {q: judged.get(q, {}) for q in table.queries}
        per: dict[str, dict[str, np.ndarray]] = {}
        for side, qrels in (("reference", ref_q), ("judged", jud_q)):
            scored = [evaluate_run(qrels, runs[n], resolved, per_query=True, relevance_level=relevance_level,
                                   complete=True) for n in names]
            per[side] = {m.name: np.array([[s[q][m.name] for s in scored] for q in table.queries])
                         for m in resolved}
        leaderboard = {m.name: leaderboard_agreement(per["reference"][m.name], per["judged"][m.name], names,
                                                     weights, level) for m in resolved}
    out["leaderboard"] = leaderboard
    out["bootstrap"] = {"unit": "query", "n_resamples": n_resamples, "confidence_level": level, "seed": seed}
    out["relevance_level"] = relevance_level
    return out


def qrels_agreement_of_files(
    reference: str,
    judged: str,
    runs: Mapping[str, str] | None = None,
    metrics: Sequence[str] | None = None,
    relevance_level: float | None = None,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """:func:`qrels_agreement` of two TREC qrels files and TREC run files (name -> path; ``metrics`` by default
    :data:`DEFAULT_METRICS`); the options and the metric names are checked, and fewer than two runs refused, before any file is read."""
    metrics = list(metrics or DEFAULT_METRICS)
    check_confidence_level(confidence_level)
    check_resamples(n_resamples, "--n-resamples")
    resolve_metrics(metrics)
    if runs is not None and len(runs) < 2:
        raise EvretError(f"a leaderboard needs at least 2 runs, got {len(runs)}")
    read = {name: read_run(path) for name, path in runs.items()} if runs is not None else None
    return qrels_agreement(read_qrels(reference), read_qrels(judged), read, metrics, relevance_level,
                           n_resamples, confidence_level, seed)
