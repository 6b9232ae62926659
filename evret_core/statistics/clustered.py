"""Statistics over turns grouped in conversations: the cluster bootstrap and the cluster paired tests.

Turns of one conversation are not independent (a hard conversation makes every one of its turns hard), so a
conversation run resamples or flips whole conversations (the clusters) while its means stay over turns (each turn
counts once). The resampling is :mod:`evret_core.statistics.inference`'s (one index draw for every column, the C
kernel) and the tests are its paired tests, applied to per-conversation sums. With one turn per conversation every
function here equals its per-turn counterpart exactly (same seed, same draws).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.statistics.inference import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    DEFAULT_TEST_RESAMPLES,
    _resampled_means,
    check_confidence_level,
    check_resamples,
    paired_p_value,
)

__all__ = ["cluster_bootstrap_intervals", "cluster_paired_p_value", "cluster_sums", "number_clusters"]


def number_clusters(labels: list[str] | tuple[str, ...]) -> tuple[np.ndarray, int]:
    """Each label's cluster number, clusters numbered in order of first appearance, and how many there are."""
    numbers: dict[str, int] = {}
    out = np.fromiter((numbers.setdefault(label, len(numbers)) for label in labels), dtype=np.int64,
                      count=len(labels))
    return out, len(numbers)


def cluster_sums(values: np.ndarray, clusters: np.ndarray, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sum of the finite values and their count (NaN left out)."""
    values = np.asarray(values, dtype=np.float64)
    clusters = np.asarray(clusters, dtype=np.int64)
    if values.shape != clusters.shape or values.ndim != 1:
        raise EvretError(f"cluster sums need one cluster per value, got {values.shape} and {clusters.shape}")
    finite = np.isfinite(values)
    sums = np.bincount(clusters[finite], weights=values[finite], minlength=n_clusters).astype(np.float64)
    counts = np.bincount(clusters[finite], minlength=n_clusters).astype(np.float64)
    return sums, counts


def cluster_bootstrap_intervals(
    columns: Mapping[str, np.ndarray],
    clusters: np.ndarray,
    confidence_level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    used: dict[str, int] | None = None,
) -> dict[str, list[float]]:
    """Percentile interval of each column's turn-weighted mean, conversations resampled with replacement: the
    ratio estimator sum(w_c S_c) / sum(w_c N_c), computed by ``inference._resampled_means`` on the matrix
    [S_1 .. S_m, N_1 .. N_m] (one index draw for every column, the C kernel). With one turn per cluster it equals
    ``bootstrap_intervals`` exactly (same seed, same draws).

    ``clusters`` numbers each row's conversation from 0 (in order of first appearance). A resample whose drawn
    conversations hold no finite value of a column has no ratio: percentiles are over the finite resamples, and
    ``used`` (when given) receives each column's count of them. A column with fewer than two measured clusters has
    its mean as interval (as ``bootstrap_intervals`` with fewer than two queries); one with no value at all is
    left out.
    """
    level = check_confidence_level(confidence_level)
    n_resamples = check_resamples(n_resamples)
    names = list(columns)
    clusters = np.asarray(clusters, dtype=np.int64)
    n_clusters = int(clusters.max()) + 1 if clusters.size else 0
    out: dict[str, list[float]] = {}
    if not names or n_clusters == 0:
        return out
    sums, counts = zip(*(cluster_sums(columns[m], clusters, n_clusters) for m in names), strict=True)
    sum_matrix = np.column_stack(sums)
    count_matrix = np.column_stack(counts)
    measured = (count_matrix > 0).sum(axis=0)
    if n_clusters < 2:
        means = sum_matrix.sum(axis=0) / np.where(count_matrix.sum(axis=0) > 0, count_matrix.sum(axis=0), np.nan)
        for i, m in enumerate(names):
            if np.isfinite(means[i]):
                out[m] = [float(means[i]), float(means[i])]
                if used is not None:
                    used[m] = n_resamples
        return out
    resampled = _resampled_means(np.hstack([sum_matrix, count_matrix]), n_resamples, np.random.default_rng(seed))
    k = len(names)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = resampled[:, :k] / np.where(resampled[:, k:] > 0, resampled[:, k:], np.nan)
    alpha = 1.0 - level
    for i, m in enumerate(names):
        total = count_matrix[:, i].sum()
        if total == 0:
            continue
        if measured[i] < 2:
            mean = float(sum_matrix[:, i].sum() / total)
            out[m] = [mean, mean]
            if used is not None:
                used[m] = n_resamples
            continue
        finite = ratios[:, i][np.isfinite(ratios[:, i])]
        low, high = np.percentile(finite, [100 * alpha / 2, 100 * (1 - alpha / 2)])
        out[m] = [float(low), float(high)]
        if used is not None:
            used[m] = int(finite.size)
    return out


def cluster_paired_p_value(
    a: np.ndarray,
    b: np.ndarray,
    clusters: np.ndarray,
    test: str = "randomization",
    n_resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> float:
    """p-value that the turn-weighted mean of b - a is 0: ``inference.paired_p_value(zeros(C), D, test, ...)`` on
    the per-conversation sums D_c of b - a over turns measured under both (signs flipped, or resampled, per
    conversation; the t test on D). Conversations with no turn measured under both are left out. With one turn per
    cluster it equals ``paired_p_value`` on the turns exactly."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    clusters = np.asarray(clusters, dtype=np.int64)
    if x.shape != y.shape or x.shape != clusters.shape or x.ndim != 1:
        raise EvretError(f"a clustered paired test needs two score lists and their clusters of one length, got "
                         f"{x.shape}, {y.shape} and {clusters.shape}")
    n_clusters = int(clusters.max()) + 1 if clusters.size else 0
    sums, counts = cluster_sums(y - x, clusters, n_clusters)
    d = sums[counts > 0]
    return paired_p_value(np.zeros(d.size), d, test, n_resamples, seed)
