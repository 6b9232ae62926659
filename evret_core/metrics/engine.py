"""Evaluate runs in the dict formats of pytrec_eval and ranx, or as ranked lists, with trec_eval's semantics.

The dict → array conversion is where the time goes, so it avoids per-document Python work: a query's scores
are read with one ``np.fromiter`` over all queries, only the retrieved documents that are judged (a set
intersection per query, done in C) are looked up, and their ranks are counted against the padded score matrix
(scores strictly higher, then ties broken by document id in descending order, as trec_eval does). Queries are
processed in chunks so the peak memory stays bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np

from evret_core.errors import EvretError
from evret_core.metrics.base import Metric, RankedBatch, _pad_rows, qrels_matrix

__all__ = ["evaluate_run", "evaluate_rankings", "batch_from_run", "resolve_metrics"]

MetricSpec = str | Metric
_EMPTY: Mapping[str, float] = {}
_NAN = float("nan")
# entries of the (judged documents x ranking length) comparison blocks: bounds the memory of a block
_BLOCK_ELEMENTS = 1 << 22
_CHUNK = 8192


def resolve_metrics(metrics: Iterable[MetricSpec] | MetricSpec) -> list[Metric]:
    """Metric instances from names such as ``"ndcg@10"`` (any registered family) or ready instances."""
    from evret_core.registry import create_metric

    if isinstance(metrics, str | Metric):
        metrics = [metrics]
    out = [create_metric(m) if isinstance(m, str) else m for m in metrics]
    if not out:
        raise EvretError("no metrics given")
    names = [m.name for m in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise EvretError(f"metric(s) listed twice: {', '.join(dupes)}")
    return out


def _needed_depth(metrics: Sequence[Metric]) -> int | None:
    depths = [m.depth for m in metrics]
    return None if any(d is None for d in depths) else max(d for d in depths if d is not None)


def _query_ids(qrels: Mapping[str, Any], run: Mapping[str, Any], complete: bool) -> list[str]:
    """trec_eval's query set: the run's queries that have judgments; with ``complete``, every judged query."""
    qids = [q for q in run if q in qrels]
    if complete:
        qids += [q for q in qrels if q not in run]
    if not qids:
        raise EvretError(
            "no query of the run has relevance judgments (the qrels and the run share no query id)"
            + ("" if complete or not qrels else "; complete=True scores every judged query, missing ones as 0")
        )
    return qids


def evaluate_run(
    qrels: Mapping[str, Mapping[str, float]],
    run: Mapping[str, Mapping[str, float]],
    metrics: Iterable[MetricSpec] | MetricSpec,
    per_query: bool = False,
    *,
    relevance_level: float | None = None,
    complete: bool = False,
    chunk_size: int = _CHUNK,
) -> dict[str, Any]:
    """Score a run ``{qid: {docid: score}}`` against qrels ``{qid: {docid: grade}}``, as trec_eval does.

    Documents are ranked by score descending, ties by document id in descending string order. Only the run's
    queries that have judgments are scored, unless ``complete`` (trec_eval -c): then every judged query counts
    and those missing from the run score 0. A document is relevant when its grade is > 0, or >= the
    ``relevance_level`` (trec_eval -l). Returns ``{metric: mean}``, or ``{qid: {metric: value}}`` with
    ``per_query=True``.
    """
    resolved = resolve_metrics(metrics)
    qids = _query_ids(qrels, run, complete)
    depth = _needed_depth(resolved)
    columns = _compute_chunked(
        lambda chunk: batch_from_run(qrels, run, chunk, relevance_level=relevance_level, depth=depth),
        qids, resolved, chunk_size,
    )
    return _package(qids, resolved, columns, per_query)


def evaluate_rankings(
    qrels: Mapping[str, Mapping[str, float]],
    rankings: Mapping[str, Sequence[str]],
    metrics: Iterable[MetricSpec] | MetricSpec,
    per_query: bool = False,
    *,
    relevance_level: float | None = None,
    complete: bool = False,
    chunk_size: int = _CHUNK,
) -> dict[str, Any]:
    """Like :func:`evaluate_run`, for already ranked lists ``{qid: [docid, ...]}`` (best first): no sorting.

    A document listed twice for a query is an error naming the query and the document.
    """
    resolved = resolve_metrics(metrics)
    qids = _query_ids(qrels, rankings, complete)
    depth = _needed_depth(resolved)
    empty: Sequence[str] = ()

    def build(chunk: list[str]) -> RankedBatch:
        return RankedBatch.from_rankings(
            [rankings.get(q, empty) for q in chunk], [qrels[q] for q in chunk], relevance_level,
            depth=depth, duplicates="error", query_ids=chunk,
        )

    columns = _compute_chunked(build, qids, resolved, chunk_size)
    return _package(qids, resolved, columns, per_query)


def _compute_chunked(build: Any, qids: list[str], metrics: Sequence[Metric], chunk_size: int) -> list[np.ndarray]:
    parts: list[list[np.ndarray]] = [[] for _ in metrics]
    for start in range(0, len(qids), max(chunk_size, 1)):
        batch = build(qids[start : start + chunk_size])
        for i, metric in enumerate(metrics):
            parts[i].append(np.asarray(metric.compute(batch), dtype=np.float64))
    return [np.concatenate(p) for p in parts]


def _package(qids: list[str], metrics: Sequence[Metric], columns: list[np.ndarray], per_query: bool) -> dict[str, Any]:
    names = [m.name for m in metrics]
    if not per_query:
        return {name: float(col.mean()) for name, col in zip(names, columns, strict=True)}
    rows = zip(*(col.tolist() for col in columns), strict=True)
    return {qid: dict(zip(names, row, strict=True)) for qid, row in zip(qids, rows, strict=True)}


# -- dict run -> RankedBatch ---------------------------------------------------------------------------------------
def batch_from_run(
    qrels: Mapping[str, Mapping[str, float]],
    run: Mapping[str, Mapping[str, float]],
    qids: Sequence[str],
    *,
    relevance_level: float | None = None,
    depth: int | None = None,
) -> RankedBatch:
    """The :class:`RankedBatch` of ``qids``: each query's run ranked the trec_eval way, graded by its qrels."""
    runs = [run.get(q, _EMPTY) for q in qids]
    judged = [qrels.get(q, _EMPTY) for q in qids]
    n = len(qids)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=n)
    total = int(lengths.sum())
    length = int(lengths.max()) if n else 0
    width = length if depth is None else min(length, depth)
    try:
        flat = np.fromiter(chain.from_iterable(r.values() for r in runs), dtype=np.float64, count=total)
    except (TypeError, ValueError):
        raise _bad_score(qids, runs) from None
    if np.isnan(flat).any():
        raise _bad_score(qids, runs)
    scores = _pad_rows(flat, lengths, length, -np.inf)

    # the retrieved documents that are judged: the only ones whose rank matters
    common = [j.keys() & r.keys() if j and r else () for j, r in zip(judged, runs, strict=True)]
    counts = np.fromiter(map(len, common), dtype=np.int64, count=n)
    n_judged = int(counts.sum())
    grades = np.full((n, width), np.nan)
    if n_judged and width:
        if n_judged * length > 32 * max(total, 1):
            # many judged documents per query: sorting every ranking is cheaper than counting per document
            grades = _grades_by_sorting(scores, lengths, runs, judged, qids, width)
        else:
            _place_judged(grades, scores, lengths, runs, judged, common, counts, width)
    return RankedBatch(grades, qrels_matrix(judged), lengths, relevance_level)


def _place_judged(
    grades: np.ndarray,
    scores: np.ndarray,
    lengths: np.ndarray,
    runs: list[Mapping[str, float]],
    judged: list[Mapping[str, float]],
    common: list[Any],
    counts: np.ndarray,
    width: int,
) -> None:
    rows = np.repeat(np.arange(len(runs)), counts)
    docs = list(chain.from_iterable(common))
    doc_scores = np.fromiter(
        chain.from_iterable(map(r.__getitem__, c) for r, c in zip(runs, common, strict=True)),
        dtype=np.float64, count=len(docs),
    )
    doc_grades = np.fromiter(
        chain.from_iterable(map(j.__getitem__, c) for j, c in zip(judged, common, strict=True)),
        dtype=np.float64, count=len(docs),
    )
    length = scores.shape[1]
    ranks = np.empty(len(docs), dtype=np.int64)
    ties = np.empty(len(docs), dtype=np.int64)
    block = max(_BLOCK_ELEMENTS // max(length, 1), 1)
    for start in range(0, len(docs), block):
        sl = slice(start, start + block)
        row_scores = scores[rows[sl]]
        s = doc_scores[sl, None]
        ranks[sl] = (row_scores > s).sum(axis=1)
        ties[sl] = (row_scores == s).sum(axis=1)
    tied = np.flatnonzero(ties > 1)
    if tied.size:
        # equal scores: trec_eval puts the larger document id first
        row_docs: dict[int, list[str]] = {}
        for i in tied.tolist():
            q = int(rows[i])
            run_q = runs[q]
            s_i = doc_scores[i]
            doc = docs[i]
            if q not in row_docs:
                row_docs[q] = list(run_q)
            ranks[i] += sum(1 for other in row_docs[q] if run_q[other] == s_i and other > doc)
    keep = ranks < width
    grades[rows[keep], ranks[keep]] = doc_grades[keep]
    del lengths


def _grades_by_sorting(
    scores: np.ndarray,
    lengths: np.ndarray,
    runs: list[Mapping[str, float]],
    judged: list[Mapping[str, float]],
    qids: Sequence[str],
    width: int,
) -> np.ndarray:
    length = scores.shape[1]
    flat_grades = np.fromiter(
        chain.from_iterable(map(j.get, r, repeat(_NAN)) for j, r in zip(judged, runs, strict=True)),
        dtype=np.float64, count=int(lengths.sum()),
    )
    grade_matrix = _pad_rows(flat_grades, lengths, length, _NAN)
    # stable sort on descending score keeps the padding (after every real column) last
    order = np.argsort(-scores, axis=1, kind="stable")
    sorted_scores = np.take_along_axis(scores, order, axis=1)
    out = np.take_along_axis(grade_matrix, order, axis=1)
    valid = np.arange(length) < lengths[:, None]
    tie = (sorted_scores[:, 1:] == sorted_scores[:, :-1]) & valid[:, 1:]
    for q in np.flatnonzero(tie.any(axis=1)).tolist():
        from evret_core.metrics.trec import ranked_docs

        run_q, judged_q = runs[q], judged[q]
        ordered = ranked_docs(run_q)
        out[q, : len(ordered)] = [judged_q.get(d, _NAN) for d in ordered]
    return out[:, :width]


def _bad_score(qids: Sequence[str], runs: list[Mapping[str, float]]) -> EvretError:
    for qid, run_q in zip(qids, runs, strict=True):
        for doc, score in run_q.items():
            try:
                value = float(score)
            except (TypeError, ValueError):
                return EvretError(f"run: query {qid}: document {doc!r} has a non-numeric score {score!r}")
            if value != value:
                return EvretError(f"run: query {qid}: document {doc!r} has a NaN score")
    return EvretError("run: a score is not a number")
