"""Evaluate runs in the dict formats of pytrec_eval and ranx, or as ranked lists, with trec_eval's semantics.

The dict → array conversion is where the time goes, so it avoids per-document Python work: scores are read
with ``np.fromiter`` over blocks of queries, only the judged documents are looked up in the run dicts (right
after their block's scores, while those dicts are in cache), and their ranks are counted against the padded score
matrix (scores strictly higher, then ties broken by document id in descending order, as trec_eval does). Queries
are processed in chunks so the peak memory stays bounded.

Where the optional compiled accelerator ``evret_core.metrics._fastrank`` was built, it replaces that reading
and rank counting for exact dicts of exact str ids and float/int values (one C walk per dict, same ranks), and,
for ranked lists, the hashing that rejects duplicates and finds judged documents (one C walk per list); anything
else, and ``EVRET_PURE_PYTHON=1``, takes the numpy path. The queries are looked up in Python for both paths, so
no Python code (a key's ``__eq__``, a mapping's ``get``) runs while the C code works.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, repeat
from operator import attrgetter, methodcaller
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.contracts.metric import Metric, RankedBatch, pad_rows

__all__ = ["evaluate_run", "evaluate_rankings", "batch_from_run", "resolve_metrics", "accelerator", "judged_max_grade",
           "resolve_judged_defaults"]

try:
    from evret_core.metrics import _fastrank  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the numpy path does everything
    _fastrank = None

MetricSpec = str | Metric
_EMPTY: Mapping[str, float] = {}
_NAN = float("nan")
# entries of the (judged documents x ranking length) comparison blocks: bounds the memory of a block
_BLOCK_ELEMENTS = 1 << 17
_CHUNK = 2048
# queries whose dicts are read together: small enough that their run dicts stay in cache for the lookups
_READ_BLOCK = 128
# above this many comparisons per run entry, ranks come from one sort instead of row comparisons
_SORT_FACTOR = 16


def resolve_metrics(metrics: Iterable[MetricSpec] | MetricSpec) -> list[Metric]:
    """Metric instances from names such as ``"ndcg@10"`` (any registered family) or ready instances."""
    from evret_core.plugins.registry import create_metric

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


def judged_max_grade(judgments: Iterable[tuple[str, Mapping[str, float]]]) -> float:
    """The highest grade over every ``(query id, {doc: grade})`` given, floored at 0 (a negative grade gains
    nothing; NaN is skipped); 1.0 when there is no judgment. A grade that is not a number is an error naming its
    query and document."""
    items = list(judgments)
    try:  # one C pass over every grade
        values = np.fromiter(chain.from_iterable(g.values() for _, g in items), dtype=np.float64)
    except (TypeError, ValueError):
        for qid, grades in items:
            for doc, grade in grades.items():
                try:
                    float(grade)
                except (TypeError, ValueError):
                    raise EvretError(f"qrels: query {qid}: document {doc!r} has a non-numeric grade {grade!r}") from None
        raise
    return float(np.fmax(np.fmax.reduce(values), 0.0)) if values.size else 1.0


def resolve_judged_defaults(
    metrics: Sequence[Metric], judgments: Callable[[], Iterable[tuple[str, Mapping[str, float]]]]
) -> list[Metric]:
    """``metrics`` with every default that depends on the whole evaluation's judgments resolved, once, before the
    queries are cut into chunks, batches or shards (so a query's value never depends on which queries share its
    chunk). ``judgments`` gives every ``(query id, {doc: grade})`` of the evaluation; it is called only when a
    metric needs it (e.g. ``err`` without ``max_grade``). Names are unchanged; metrics already resolved are kept."""
    if not any(m.needs_judged_max for m in metrics):
        return list(metrics)
    top = judged_max_grade(judgments())
    return [m.with_judged_max(top) if m.needs_judged_max else m for m in metrics]


def accelerator() -> Any:
    """The compiled dict reader, or None when it was not built or ``EVRET_PURE_PYTHON`` is set (not "" or "0")."""
    if os.environ.get("EVRET_PURE_PYTHON", "") not in ("", "0"):
        return None
    return _fastrank


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
    ``per_query=True``. Defaults that depend on the judgments (err's ``max_grade``) are resolved over all of
    ``qrels`` before the queries are cut into chunks of ``chunk_size``, so no value depends on the chunking.
    """
    resolved = resolve_judged_defaults(resolve_metrics(metrics), qrels.items)  # err's max_grade: all the qrels
    qids = _query_ids(qrels, run, complete)
    depth = _needed_depth(resolved)
    fast = accelerator()
    columns = _compute_chunked(
        lambda chunk: batch_from_run(qrels, run, chunk, relevance_level=relevance_level, depth=depth, fast=fast),
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
    resolved = resolve_judged_defaults(resolve_metrics(metrics), qrels.items)
    qids = _query_ids(qrels, rankings, complete)
    depth = _needed_depth(resolved)
    empty: Sequence[str] = ()
    fast = accelerator()

    def build(chunk: list[str]) -> RankedBatch:
        # looked up here, in Python, for both paths: the compiled reader only ever sees these two lists
        lists = list(map(rankings.get, chunk, repeat(empty)))
        judged = list(map(qrels.__getitem__, chunk))
        if fast is not None:
            read = fast.rank_lists_chunk(lists, judged)
            if read is not None:
                return _batch_from_read(read, depth, relevance_level)
        return RankedBatch.from_rankings(
            lists, judged, relevance_level, depth=depth, duplicates="error", query_ids=chunk,
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
    return dict(zip(qids, map(dict, map(zip, repeat(names), rows)), strict=True))


# -- dict run -> RankedBatch ---------------------------------------------------------------------------------------
_values = methodcaller("values")
_get = attrgetter("get")
_NANS = repeat(_NAN)  # the default of every lookup: one endless iterator shared by all queries


def batch_from_run(
    qrels: Mapping[str, Mapping[str, float]],
    run: Mapping[str, Mapping[str, float]],
    qids: Sequence[str],
    *,
    relevance_level: float | None = None,
    depth: int | None = None,
    fast: Any = None,
) -> RankedBatch:
    """The :class:`RankedBatch` of ``qids``: each query's run ranked the trec_eval way, graded by its qrels.

    ``fast``: the compiled reader (see :func:`accelerator`); it declines (None) whatever it does not handle.
    """
    # Looked up here, in Python, for both paths: any code a key's __eq__ or a mapping's get runs has finished
    # before the compiled reader starts, and it only ever sees these two lists of per-query dicts.
    runs = list(map(run.get, qids, repeat(_EMPTY)))
    judged = list(map(qrels.get, qids, repeat(_EMPTY)))
    if fast is not None:
        read = fast.rank_chunk(runs, judged)
        if read is not None:
            return _batch_from_read(read, depth, relevance_level)
    n = len(qids)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=n)
    qrel_lengths = np.fromiter(map(len, judged), dtype=np.int64, count=n)
    total, n_judged = int(lengths.sum()), int(qrel_lengths.sum())
    length = int(lengths.max()) if n else 0
    width = length if depth is None else min(length, depth)
    # Read in blocks of a few queries: a block's scores, then the run's score of each judged document (NaN: not
    # retrieved), then the judged grades. The lookups find the block's run dicts still in cache (a separate pass
    # over a whole chunk costs a cache miss or more per lookup).
    flat = np.empty(total, dtype=np.float64)
    judged_scores = np.empty(n_judged, dtype=np.float64)
    qrel_flat = np.empty(n_judged, dtype=np.float64)
    run_ends = [0, *np.cumsum(lengths).tolist()]
    qrel_ends = [0, *np.cumsum(qrel_lengths).tolist()]
    try:
        for s in range(0, n, _READ_BLOCK):
            e = min(s + _READ_BLOCK, n)
            runs_b, judged_b = runs[s:e], judged[s:e]
            a, b = run_ends[s], run_ends[e]
            flat[a:b] = np.fromiter(chain.from_iterable(map(_values, runs_b)), dtype=np.float64, count=b - a)
            a, b = qrel_ends[s], qrel_ends[e]
            lookups = chain.from_iterable(map(map, map(_get, runs_b), judged_b, repeat(_NANS)))
            judged_scores[a:b] = np.fromiter(lookups, dtype=np.float64, count=b - a)
            qrel_flat[a:b] = np.fromiter(chain.from_iterable(map(_values, judged_b)), dtype=np.float64, count=b - a)
    except (TypeError, ValueError):
        raise _bad_value(qids, runs, judged) from None
    if np.isnan(flat).any():
        raise _bad_value(qids, runs, judged)
    padded = pad_rows(flat, lengths, length, -np.inf)

    rows = np.repeat(np.arange(n), qrel_lengths)
    ranks = np.full(n_judged, -1, dtype=np.int64)
    hit = np.flatnonzero(~np.isnan(judged_scores))
    if hit.size and width:
        if hit.size * length > _SORT_FACTOR * total:
            # many judged documents per query: sorting the run once beats comparing each with its ranking
            greater, ties = _count_by_sorting(flat, lengths, rows[hit], judged_scores[hit])
        else:
            greater, ties = _count_by_comparing(padded, rows[hit], judged_scores[hit])
        tied = np.flatnonzero(ties > 1)
        if tied.size:
            _break_ties(greater, hit[tied], tied, padded, lengths, rows, judged_scores, qrel_lengths, runs, judged)
        ranks[hit] = greater
    return RankedBatch.from_positions(rows, ranks, qrel_flat, qrel_lengths, lengths, width, relevance_level)


def _batch_from_read(read: tuple[bytearray, ...], depth: int | None, relevance_level: float | None) -> RankedBatch:
    """Wrap the compiled reader's buffers (no copy) and build the batch as the numpy path does."""
    num_ret, qrel_lengths, ranks = (np.frombuffer(b, dtype=np.int64) for b in read[:3])
    grades = np.frombuffer(read[3], dtype=np.float64)
    length = int(num_ret.max()) if len(num_ret) else 0
    width = length if depth is None else min(length, depth)
    rows = np.repeat(np.arange(len(num_ret)), qrel_lengths)
    return RankedBatch.from_positions(rows, ranks, grades, qrel_lengths, num_ret, width, relevance_level)


def _count_by_comparing(scores: np.ndarray, rows: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per document: how many documents of its ranking score higher, and how many score the same."""
    greater = np.empty(len(rows), dtype=np.int64)
    ties = np.empty(len(rows), dtype=np.int64)
    width = scores.shape[1]
    # summing booleans into a narrow integer is several times faster than count_nonzero along an axis
    acc = np.uint8 if width < 1 << 8 else np.uint16 if width < 1 << 16 else np.int64
    block = max(_BLOCK_ELEMENTS // max(width, 1), 1)
    for start in range(0, len(rows), block):
        sl = slice(start, start + block)
        row_scores = scores[rows[sl]]
        v = values[sl, None]
        greater[sl] = (row_scores > v).view(np.uint8).sum(axis=1, dtype=acc)
        ties[sl] = (row_scores == v).view(np.uint8).sum(axis=1, dtype=acc)
    return greater, ties


def _count_by_sorting(
    flat: np.ndarray, lengths: np.ndarray, rows: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`_count_by_comparing`, in O(N log N): one integer key (query, descending score) per document."""
    uniq = np.unique(flat)
    span = len(uniq) + 1
    run_rows = np.repeat(np.arange(len(lengths)), lengths)
    keys = np.sort(run_rows * span + (len(uniq) - np.searchsorted(uniq, flat)))
    probe = rows * span + (len(uniq) - np.searchsorted(uniq, values))
    starts = (np.cumsum(lengths) - lengths)[rows]
    left = np.searchsorted(keys, probe, side="left")
    right = np.searchsorted(keys, probe, side="right")
    return left - starts, right - left


def _break_ties(
    greater: np.ndarray,
    judgments: np.ndarray,
    slots: np.ndarray,
    padded: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
    judged_scores: np.ndarray,
    qrel_lengths: np.ndarray,
    runs: list[Mapping[str, float]],
    judged: list[Mapping[str, float]],
) -> None:
    """Equal scores: trec_eval ranks the larger document id first, so count the tied ids above each document.

    ``judgments`` are the tied judgments (indexes into ``rows``/``judged_scores``), ``slots`` where their counts
    sit in ``greater``. Only the documents that share a score are compared, in Python.
    """
    t_rows = rows[judgments]
    same = padded[t_rows] == judged_scores[judgments][:, None]
    same &= np.arange(padded.shape[1]) < lengths[t_rows][:, None]
    which, cols = np.nonzero(same)
    qrel_starts = np.cumsum(qrel_lengths) - qrel_lengths
    run_keys: dict[int, list[str]] = {}
    judged_keys: dict[int, list[str]] = {}
    docs: list[str] = []
    for i, q in zip(judgments.tolist(), t_rows.tolist(), strict=True):
        if q not in judged_keys:
            judged_keys[q] = list(judged[q])
            run_keys[q] = list(runs[q])
        docs.append(judged_keys[q][i - int(qrel_starts[q])])
    above = np.zeros(len(judgments), dtype=np.int64)
    row_list = t_rows.tolist()
    for w, c in zip(which.tolist(), cols.tolist(), strict=True):
        if run_keys[row_list[w]][c] > docs[w]:
            above[w] += 1
    greater[slots] += above


def _bad_value(
    qids: Sequence[str], runs: list[Mapping[str, float]], judged: list[Mapping[str, float]]
) -> EvretError:
    for qid, run_q, qrels_q in zip(qids, runs, judged, strict=True):
        for doc, score in run_q.items():
            try:
                value = float(score)
            except (TypeError, ValueError):
                return EvretError(f"run: query {qid}: document {doc!r} has a non-numeric score {score!r}")
            if value != value:
                return EvretError(f"run: query {qid}: document {doc!r} has a NaN score")
        for doc, grade in qrels_q.items():
            try:
                float(grade)
            except (TypeError, ValueError):
                return EvretError(f"qrels: query {qid}: document {doc!r} has a non-numeric grade {grade!r}")
    return EvretError("run: a score is not a number")
