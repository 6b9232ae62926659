"""Rank fusion: several rankings of the same queries combined into one, vectorised over queries with numpy (no JIT).

The methods and normalisations are those of ranx 0.3.21's ``fuse``, under ranx's names, with its arithmetic
(scores equal to ranx's to 1e-9: tests/retrieve/test_fusion.py). A run's ranking of a query is its documents in the
order given (a retriever's list; for score dicts, score descending with ties by document id descending, trec_eval's
order); a query missing from a run is that run retrieving nothing for it. The fused ranking is ordered by fused
score descending, ties by document id descending (trec_eval's order, so a fused run written to a file ranks the
same when read back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError, did_you_mean

__all__ = ["METHODS", "NORMS", "FusionSettings", "fuse_columns", "fuse_runs"]

#: ranx's method names -> what each fused score is, per document (``v``: its normalised score in each run that
#: retrieved it, ``n``: how many runs retrieved it, ``w``: the run's weight)
METHODS = {
    "rrf": "sum of 1 / (rrf_k + rank) over the runs that retrieved it (reciprocal rank fusion; norm plays no part)",
    "isr": "n x the sum of 1 / rank^2 (inverse square rank; norm plays no part)",
    "sum": "CombSUM: the sum of v",
    "mnz": "CombMNZ: n x the sum of v",
    "anz": "CombANZ: the sum of v / n",
    "max": "CombMAX: the largest v (a run that missed it counts -1e9, as ranx)",
    "min": "CombMIN: the smallest v (a run that missed it counts 1e9, as ranx)",
    "wsum": "the sum of w x v",
    "wmnz": "the sum of v x the sum of w over the runs that retrieved it (weighted MNZ)",
}
#: ranx's normalisation names -> what each run's scores become, per query (before fusion)
NORMS = {
    "none": "the scores as given",
    "min-max": "(s - min) / max(max - min, 1e-9)",
    "max": "s / max(max, 1e-9)",
    "sum": "(s - min) / max(sum - min x n, 1e-9)",
    "zmuv": "(s - mean) / max(std, 1e-9), the standard deviation of the population (a z-score)",
    "rank": "1 - (rank - 1) / n, n being how many documents that run retrieved for the query",
}
_RANK_BASED = ("rrf", "isr")
_WEIGHTED = ("wsum", "wmnz")
_PAD = np.iinfo(np.int64).max


@dataclass(frozen=True)
class FusionSettings:
    """A checked fusion: ``method`` and ``norm`` (ranx names), ``weights`` (one per run, for wsum and wmnz) and
    ``rrf_k``. Build it with :meth:`check`, which names the bad option."""

    method: str = "rrf"
    norm: str = "min-max"
    weights: tuple[float, ...] | None = None
    rrf_k: float = 60.0

    @classmethod
    def check(cls, method: Any = "rrf", norm: Any = "min-max", weights: Any = None, rrf_k: Any = 60,
              n_runs: int | None = None, where: str = "fusion") -> FusionSettings:
        """The settings, or an :class:`EvretError` naming the first bad option (``where`` starts the message)."""
        if not isinstance(method, str) or method not in METHODS:
            raise EvretError(f"{where}: option method={method!r} is not a fusion method"
                             f"{did_you_mean(str(method), list(METHODS))}; one of {', '.join(METHODS)}")
        if norm is None:
            norm = "none"
        if not isinstance(norm, str) or norm not in NORMS:
            raise EvretError(f"{where}: option norm={norm!r} is not a normalisation"
                             f"{did_you_mean(str(norm), list(NORMS))}; one of {', '.join(NORMS)}")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int | float) or not np.isfinite(rrf_k) or rrf_k < 0:
            raise EvretError(f"{where}: option rrf_k must be a number >= 0, got {rrf_k!r}")
        checked: tuple[float, ...] | None = None
        if weights is not None:
            if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
                raise EvretError(f"{where}: option weights must be a list of numbers, one per retriever, "
                                 f"got {weights!r}")
            if any(isinstance(w, bool) or not isinstance(w, int | float) or not np.isfinite(w) for w in weights):
                raise EvretError(f"{where}: option weights must be finite numbers, got {list(weights)!r}")
            checked = tuple(float(w) for w in weights)
            if method not in _WEIGHTED:
                raise EvretError(f"{where}: option weights is only used by method wsum or wmnz, "
                                 f"not method={method!r}")
            if n_runs is not None and len(checked) != n_runs:
                raise EvretError(f"{where}: option weights has {len(checked)} values for {n_runs} retrievers")
        elif method in _WEIGHTED and n_runs is not None:
            checked = (1.0,) * n_runs
        if method in _WEIGHTED and weights is None and n_runs is None:
            raise EvretError(f"{where}: method {method!r} needs option weights, one per run")
        return cls(method, norm, checked, float(rrf_k))


def fuse_columns(
    runs: Sequence[Sequence[Any]], settings: FusionSettings
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Fuse per-query rankings: ``runs[r][q]`` is run ``r``'s ranking of query ``q`` (anything with ``ids`` and
    ``scores`` in rank order, such as :class:`~evret_core.contracts.retrieve.RankedColumns`); every run lists the
    same queries in the same order. Returns, per query, the fused ids (an object array) and scores, best first."""
    if len(runs) < 2:
        raise EvretError(f"fusion needs at least two runs, got {len(runs)}")
    n = len(runs[0])
    if any(len(run) != n for run in runs):
        raise EvretError("fusion: every run must list the same queries")
    flats = []
    for run in runs:
        lengths = np.fromiter(map(len, (c.ids for c in run)), dtype=np.int64, count=n)
        run_ids = list(chain.from_iterable(_as_list(c.ids) for c in run))
        scores = np.concatenate([np.asarray(c.scores, dtype=np.float64) for c in run]) if n else np.zeros(0)
        flats.append((run_ids, scores, lengths))
    counts, ids, fused = _fuse_flat(flats, n, settings, None)
    return _split(counts, ids, fused)


def fuse_runs(
    runs: Sequence[Mapping[str, Mapping[str, float]]],
    method: str = "rrf",
    norm: str | None = "min-max",
    weights: Sequence[float] | None = None,
    rrf_k: float = 60,
) -> dict[str, dict[str, float]]:
    """Fuse runs in the dict format of pytrec_eval and ranx (``{qid: {docid: score}}``, e.g. from
    :func:`~evret_core.io.trec.read_run`): each run's ranking is score descending, ties by document id descending;
    the queries are those of any run (first seen first). Returns the fused run in the same format, each query's
    documents best first."""
    settings = FusionSettings.check(method, norm, weights, rrf_k, n_runs=len(runs), where="fuse_runs")
    if len(runs) < 2:
        raise EvretError(f"fuse_runs needs at least two runs, got {len(runs)}")
    qids = list(dict.fromkeys(chain.from_iterable(runs)))
    flats = []
    for run in runs:
        per_query = [run.get(q, _EMPTY) for q in qids]
        lengths = np.fromiter(map(len, per_query), dtype=np.int64, count=len(qids))
        ids = np.fromiter(chain.from_iterable(per_query), dtype=object, count=int(lengths.sum()))
        try:
            scores = np.fromiter(chain.from_iterable(map(_values, per_query)), dtype=np.float64,
                                 count=int(lengths.sum()))
        except (TypeError, ValueError):
            raise EvretError("fuse_runs: a run has a score that is not a number") from None
        if not np.isfinite(scores).all():
            raise EvretError("fuse_runs: a run has a score that is NaN or infinite")
        order = _trec_order(lengths, ids, scores)
        flats.append((ids[order], scores[order], lengths))
    lengths, ids, scores = _fuse_flat(flats, len(qids), settings, qids)
    out: dict[str, dict[str, float]] = {}
    ends = np.cumsum(lengths).tolist()
    id_list, score_list = ids.tolist(), scores.tolist()
    start = 0
    for qid, end in zip(qids, ends, strict=True):
        out[qid] = dict(zip(id_list[start:end], score_list[start:end], strict=True))
        start = end
    return out


_EMPTY: Mapping[str, float] = {}


def _values(mapping: Mapping[str, float]) -> Iterable[float]:
    return mapping.values()


def _as_list(ids: Any) -> list[Any]:
    return ids.tolist() if hasattr(ids, "tolist") else list(ids)


def _split(lengths: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    bounds = np.cumsum(lengths).tolist()
    starts = [0, *bounds[:-1]]
    return [(ids[a:b], scores[a:b]) for a, b in zip(starts, bounds, strict=True)]


def _row_index(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per flat entry: its row and its 0-based position in the row; and each row's start."""
    starts = np.cumsum(lengths) - lengths
    rows = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(int(lengths.sum())) - starts[rows]
    return rows, pos, starts


def _row_reduce(ufunc: Any, values: np.ndarray, lengths: np.ndarray, starts: np.ndarray, empty: float) -> np.ndarray:
    """``ufunc.reduceat`` over each row's entries; ``empty`` for a row without any."""
    out = np.full(len(lengths), empty, dtype=np.float64)
    full = lengths > 0
    if values.size:
        out[full] = ufunc.reduceat(values, starts[full])
    return out


def _normalised(scores: np.ndarray, lengths: np.ndarray, norm: str) -> np.ndarray:
    """Each row's scores normalised as ranx does (see :data:`NORMS`)."""
    rows, pos, starts = _row_index(lengths)
    n = lengths.astype(np.float64)
    if norm == "none":
        return scores
    if norm == "rank":
        return np.asarray(1.0 - pos / n[rows])
    low = _row_reduce(np.minimum, scores, lengths, starts, 0.0)
    if norm == "min-max":
        high = _row_reduce(np.maximum, scores, lengths, starts, 0.0)
        return np.asarray((scores - low[rows]) / np.maximum(high - low, 1e-9)[rows])
    if norm == "max":
        high = _row_reduce(np.maximum, scores, lengths, starts, 0.0)
        return np.asarray(scores / np.maximum(high, 1e-9)[rows])
    total = _row_reduce(np.add, scores, lengths, starts, 0.0)
    if norm == "sum":
        return np.asarray((scores - low[rows]) / np.maximum(total - low * n, 1e-9)[rows])
    # zmuv: the population standard deviation
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / n
    centred = scores - mean[rows]
    std = np.sqrt(_row_reduce(np.add, centred * centred, lengths, starts, 0.0) / np.maximum(n, 1.0))
    return np.asarray(centred / np.maximum(std, 1e-9)[rows])


def _run_values(scores: np.ndarray, lengths: np.ndarray, settings: FusionSettings) -> np.ndarray:
    """What a run contributes per entry: its rank's share (rrf, isr) or its normalised score."""
    if settings.method == "rrf":
        return 1.0 / (settings.rrf_k + _row_index(lengths)[1] + 1.0)
    if settings.method == "isr":
        return 1.0 / (_row_index(lengths)[1] + 1.0) ** 2
    return _normalised(scores, lengths, settings.norm)


def _fuse_flat(
    flats: Sequence[tuple[Any, np.ndarray, np.ndarray]], n: int, settings: FusionSettings,
    qids: Sequence[str] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fusion on flat runs (per run: ids, scores and per-query lengths, each query's entries in rank order):
    per query, the fused documents' count, ids and scores, best first."""
    n_runs = len(flats)
    lengths = np.stack([f[2] for f in flats]) if n else np.zeros((n_runs, 0), dtype=np.int64)
    total = lengths.sum(axis=0)
    size = int(total.sum())
    # the runs' entries laid out query by query: query q holds run 0's ranking, then run 1's, ...
    before = np.cumsum(lengths, axis=0) - lengths
    row_start = np.cumsum(total) - total
    ids = np.empty(size, dtype=object)
    hashes = np.empty(size, dtype=np.int64)
    values = np.empty(size, dtype=np.float64)
    run_of = np.empty(size, dtype=np.int64)
    for r, (run_ids, run_scores, run_lengths) in enumerate(flats):
        rows, pos, _ = _row_index(run_lengths)
        dest = row_start[rows] + before[r][rows] + pos
        flat_ids = run_ids if isinstance(run_ids, np.ndarray) else np.fromiter(run_ids, dtype=object,
                                                                                count=len(run_ids))
        ids[dest] = flat_ids
        hashes[dest] = np.fromiter(map(hash, flat_ids), dtype=np.int64, count=flat_ids.size)
        values[dest] = _run_values(run_scores, run_lengths, settings)
        run_of[dest] = r
    width = int(total.max()) if n else 0
    # each query's entries sorted by id hash: equal documents become neighbours (stable, so in run order)
    matrix = np.full((n, width), _PAD, dtype=np.int64)
    rows_all = np.repeat(np.arange(n), total)
    cols_all = np.arange(size) - row_start[rows_all]
    matrix[rows_all, cols_all] = hashes
    order = np.argsort(matrix, axis=1, kind="stable")
    valid = order < total[:, None]
    flat_order = (order + row_start[:, None])[valid]
    sorted_hash = hashes[flat_order]
    sorted_rows = rows_all[flat_order]
    first = np.ones(size, dtype=bool)
    if size > 1:
        first[1:] = (sorted_hash[1:] != sorted_hash[:-1]) | (sorted_rows[1:] != sorted_rows[:-1])
    starts = np.flatnonzero(first)
    sorted_ids = ids[flat_order]
    later = np.flatnonzero(~first)
    if later.size:
        group_first = starts[np.searchsorted(starts, later, side="right") - 1]
        same = sorted_ids[later] == sorted_ids[group_first]
        if not same.all():  # two ids with one hash (a collision): split the groups by the ids themselves
            return _fuse_exact(flats, n, settings, ids, values, run_of, row_start, total, qids)
        sorted_runs = run_of[flat_order]
        dupes = later[sorted_runs[later] == sorted_runs[later - 1]]
        if dupes.size:
            q = int(sorted_rows[dupes[0]])
            who = qids[q] if qids is not None else f"#{q}"
            raise EvretError(f"fusion: run {int(sorted_runs[dupes[0]]) + 1} ranks document "
                             f"{sorted_ids[dupes[0]]!r} more than once for query {who}")
    fused = _combine(values[flat_order], run_of[flat_order], starts, size, n_runs, settings)
    group_rows = sorted_rows[starts]
    group_ids = sorted_ids[starts]
    counts = np.bincount(group_rows, minlength=n).astype(np.int64)
    order_out = _trec_order(counts, group_ids, fused)
    return counts, group_ids[order_out], fused[order_out]


def _combine(values: np.ndarray, runs: np.ndarray, starts: np.ndarray, size: int, n_runs: int,
             settings: FusionSettings) -> np.ndarray:
    """Each group's (one document of one query) fused score from its entries (one per run that retrieved it)."""
    if not starts.size:
        return np.zeros(0)
    method = settings.method
    count = np.diff(np.append(starts, size)).astype(np.float64)
    if method in ("max", "min"):
        best = (np.maximum if method == "max" else np.minimum).reduceat(values, starts)
        missing = -1e9 if method == "max" else 1e9
        edge = (np.maximum if method == "max" else np.minimum)(best, missing)
        return np.where(count < n_runs, edge, best)
    if method == "wsum":
        weights = np.asarray(settings.weights, dtype=np.float64)
        return np.add.reduceat(weights[runs] * values, starts)
    summed = np.add.reduceat(values, starts)
    if method in ("rrf", "sum"):
        return summed
    if method in ("mnz", "isr"):
        return summed * count
    if method == "anz":
        return summed / count
    weights = np.asarray(settings.weights, dtype=np.float64)  # wmnz
    return summed * np.add.reduceat(weights[runs], starts)


def _fuse_exact(
    flats: Sequence[tuple[Any, np.ndarray, np.ndarray]], n: int, settings: FusionSettings, ids: np.ndarray,
    values: np.ndarray, run_of: np.ndarray, row_start: np.ndarray, total: np.ndarray, qids: Sequence[str] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same fusion grouping by the ids themselves (one dict per query): only when two ids share a hash."""
    counts = np.zeros(n, dtype=np.int64)
    out_ids: list[Any] = []
    out_values: list[np.ndarray] = []
    out_runs: list[np.ndarray] = []
    starts_all: list[int] = []
    size = 0
    for q in range(n):
        groups: dict[Any, list[int]] = {}
        for i in range(int(row_start[q]), int(row_start[q] + total[q])):
            members = groups.setdefault(ids[i], [])
            if members and run_of[members[-1]] == run_of[i]:
                who = qids[q] if qids is not None else f"#{q}"
                raise EvretError(f"fusion: run {int(run_of[i]) + 1} ranks document {ids[i]!r} more than once "
                                 f"for query {who}")
            members.append(i)
        counts[q] = len(groups)
        for doc, members in groups.items():
            out_ids.append(doc)
            starts_all.append(size)
            size += len(members)
            out_values.append(values[members])
            out_runs.append(run_of[members])
    flat_values = np.concatenate(out_values) if out_values else np.zeros(0)
    flat_runs = np.concatenate(out_runs) if out_runs else np.zeros(0, dtype=np.int64)
    fused = _combine(flat_values, flat_runs, np.asarray(starts_all, dtype=np.int64), size, len(flats), settings)
    group_ids = np.asarray(out_ids + [None], dtype=object)[:-1]
    order = _trec_order(counts, group_ids, fused)
    return counts, group_ids[order], fused[order]


def _trec_order(lengths: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The flat permutation that orders each row's entries by score descending, ties by id descending."""
    n = len(lengths)
    size = int(lengths.sum())
    if not size:
        return np.zeros(0, dtype=np.int64)
    rows, pos, starts = _row_index(lengths)
    same_row = rows[1:] == rows[:-1]
    # a stable sort by (row, -score): rows stay in place, ties keep their given order for now; none when each row
    # is already by score (a run read in rank order, a retriever's list)
    if bool(np.all((scores[1:] <= scores[:-1]) | ~same_row)):
        order = np.arange(size)
    elif n * int(lengths.max()) <= 4 * size + 1024:  # rows of similar lengths: sort each row of a padded matrix
        matrix = np.full((n, int(lengths.max())), np.inf)
        matrix[rows, pos] = -scores
        perm = np.argsort(matrix, axis=1, kind="stable")
        order = (perm + starts[:, None])[perm < lengths[:, None]]
    else:
        order = np.lexsort((-scores, rows))
    sorted_scores = scores[order]
    tie = np.zeros(size, dtype=bool)
    tie[1:] = (sorted_scores[1:] == sorted_scores[:-1]) & same_row
    if not tie.any():
        return order
    # tie blocks: maximal runs of equal scores in one row; each is ordered by id, descending, in one stable sort of
    # the tied entries by (block, id rank): the ids are compared once, as the sorted set of the distinct tied ids
    block_start = np.flatnonzero(~tie)
    block_len = np.diff(np.append(block_start, size))
    tied = block_len > 1
    lengths_tied = block_len[tied]
    members = np.repeat(block_start[tied] - (np.cumsum(lengths_tied) - lengths_tied), lengths_tied)
    members += np.arange(members.size)
    entries = order[members]
    block_of = np.repeat(np.arange(lengths_tied.size), lengths_tied)
    order[members] = entries[np.lexsort((-_id_ranks(ids[entries]), block_of))]
    return order


def _id_ranks(ids: np.ndarray) -> np.ndarray:
    """Each id's rank among the distinct ids given (ascending: equal ids, equal ranks), as int64."""
    listed = ids.tolist()
    rank = {doc: i for i, doc in enumerate(sorted(set(listed)))}
    return np.fromiter(map(rank.__getitem__, listed), dtype=np.int64, count=len(listed))
