"""How two scorings of the same systems rank them: Kendall's tau-b, Yilmaz et al.'s tau_AP, Spearman's rho, the
swap rate and the tied pairs.

Every function takes ``reference`` and ``judged`` scores of shape ``(..., S)`` (S systems, any leading axes: the
bootstrap resamples) and returns one value per leading index. Two scores closer than ``tol`` are tied (a system
mean summed in another order may differ in its last bits). The formulas are written out in docs/agreement.md;
a statistic that is undefined (a side with every system tied) is NaN, which callers report as null with a reason.
"""

from __future__ import annotations

import numpy as np

__all__ = ["kendall_tau_b", "pair_signs", "spearman_rho", "swap_rate", "tau_ap", "tied_pairs"]

TOL = 1e-12


def pair_signs(scores: np.ndarray, tol: float = TOL) -> np.ndarray:
    """sign(s_i - s_j) for every ordered pair, 0 within ``tol``: shape ``(..., S, S)``."""
    s = np.asarray(scores, dtype=np.float64)
    diff = s[..., :, None] - s[..., None, :]
    return np.where(np.abs(diff) <= tol, 0.0, np.sign(diff))


def _upper(s: int) -> np.ndarray:
    return np.triu(np.ones((s, s), dtype=bool), k=1)


def kendall_tau_b(reference: np.ndarray, judged: np.ndarray, tol: float = TOL) -> np.ndarray:
    """(C - D) / sqrt((n0 - n1)(n0 - n2)) over the S(S-1)/2 pairs; NaN when a side ties every pair."""
    a, b = pair_signs(reference, tol), pair_signs(judged, tol)
    upper = _upper(a.shape[-1])
    n0 = upper.sum()
    both = (a * b)[..., upper].sum(axis=-1)
    n1 = (a == 0)[..., upper].sum(axis=-1)
    n2 = (b == 0)[..., upper].sum(axis=-1)
    den = np.sqrt((n0 - n1).astype(np.float64) * (n0 - n2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, both / den, np.nan)


def _ranks(scores: np.ndarray, tol: float) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank."""
    signs = pair_signs(scores, tol)
    below = (signs > 0).sum(axis=-1)
    tied = (signs == 0).sum(axis=-1)  # itself included
    return np.asarray(below + (tied + 1) / 2.0, dtype=np.float64)


def spearman_rho(reference: np.ndarray, judged: np.ndarray, tol: float = TOL) -> np.ndarray:
    """Pearson's correlation of the average ranks; NaN when a side ties every system."""
    x, y = _ranks(reference, tol), _ranks(judged, tol)
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    den = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (x * y).sum(axis=-1) / den, np.nan)


def swap_rate(reference: np.ndarray, judged: np.ndarray, tol: float = TOL) -> np.ndarray:
    """Pairs strictly ordered under both scorings, in opposite orders, over all S(S-1)/2 pairs."""
    a, b = pair_signs(reference, tol), pair_signs(judged, tol)
    upper = _upper(a.shape[-1])
    return np.asarray(((a * b) < 0)[..., upper].sum(axis=-1) / upper.sum(), dtype=np.float64)


def tied_pairs(reference: np.ndarray, judged: np.ndarray, tol: float = TOL) -> np.ndarray:
    """Pairs tied under either scoring."""
    a, b = pair_signs(reference, tol), pair_signs(judged, tol)
    return np.asarray(((a == 0) | (b == 0))[..., _upper(a.shape[-1])].sum(axis=-1))


def tau_ap(reference: np.ndarray, judged: np.ndarray, tol: float = TOL) -> np.ndarray:
    """Yilmaz, Aslam and Robertson's (2008) AP correlation of the judged ranking against the reference.

    Systems in the judged order (best first); tau_AP = 2/(S-1) sum_{i=2..S} C(i)/(i-1) - 1, C(i) the systems
    above position i that the reference does not put below the system at i. The definition has no ties; here a
    pair tied in the reference counts as correctly ordered (the reference orders it no way), and systems tied in
    the judged scores are placed in reference order from the lowest (a tie the reference separates counts
    against the judge). Identical rankings give 1, reversed ones -1.
    """
    ref = np.asarray(reference, dtype=np.float64)
    jud = np.asarray(judged, dtype=np.float64)
    s = ref.shape[-1]
    if s < 2:
        return np.full(ref.shape[:-1], np.nan)
    # judged descending; within a judged tie, reference ascending (lexsort: last key first)
    order = np.lexsort((ref, -_tie_merged(jud, tol)), axis=-1)
    ref_sorted = np.take_along_axis(ref, order, axis=-1)
    signs = pair_signs(ref_sorted, tol)  # [.., i, j]: sign(ref_i - ref_j)
    above = np.tril(np.ones((s, s), dtype=bool), k=-1)  # j < i: j above i
    correct = ((signs <= 0) & above).sum(axis=-1)  # ref_j >= ref_i for the systems j above i
    positions = np.arange(1, s)
    total = (correct[..., 1:] / positions).sum(axis=-1)
    return np.asarray(2.0 / (s - 1) * total - 1.0, dtype=np.float64)


def _tie_merged(scores: np.ndarray, tol: float) -> np.ndarray:
    """Scores with each group of values within ``tol`` of a neighbour set to the group's largest value, so
    lexsort treats them as equal."""
    order = np.argsort(-scores, axis=-1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=-1)
    merged = ranked.copy()
    for i in range(1, ranked.shape[-1]):
        close = np.abs(ranked[..., i - 1] - ranked[..., i]) <= tol
        merged[..., i] = np.where(close, merged[..., i - 1], ranked[..., i])
    out = np.empty_like(merged)
    np.put_along_axis(out, order, merged, axis=-1)
    return out
