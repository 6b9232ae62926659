"""Agreement of two raters' grades from their confusion matrices: exact agreement, Cohen's kappa, linear and
quadratic weighted kappa, Krippendorff's ordinal alpha and the 2x2 confusion at every cut.

Every function takes confusions of shape ``(..., K, K)`` (rows: the reference rater, columns: the judged one;
category ``i`` is the ``i``-th grade in ascending order) and returns one value per leading index, so a single
table and every bootstrap resample go through one formula. The formulas are written out in docs/agreement.md.
Conventions for degenerate tables: a kappa is 0 when chance agreement is complete (both raters constant on the
same grade; as in :mod:`evret_core.calibration.agreement`), and alpha is NaN when the grades show no variation at
all (expected disagreement 0), which callers report as null with a reason.
"""

from __future__ import annotations

import numpy as np

__all__ = ["binary_confusions", "cohen_kappa", "exact_agreement", "krippendorff_alpha", "weighted_kappa"]


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _table(confusion: np.ndarray) -> np.ndarray:
    table = np.asarray(confusion, dtype=np.float64)
    if table.ndim < 2 or table.shape[-1] != table.shape[-2]:
        raise ValueError(f"a confusion matrix must be square in its last two axes, got shape {table.shape}")
    return table


def exact_agreement(confusion: np.ndarray) -> np.ndarray:
    """p_o = trace(O) / n."""
    o = _table(confusion)
    return _div(np.trace(o, axis1=-2, axis2=-1), o.sum(axis=(-2, -1)))


def cohen_kappa(confusion: np.ndarray) -> np.ndarray:
    """(p_o - p_e) / (1 - p_e), p_e = sum_k r_k c_k / n^2; 0 where p_e = 1."""
    o = _table(confusion)
    n = o.sum(axis=(-2, -1))
    expected = _div((o.sum(axis=-1) * o.sum(axis=-2)).sum(axis=-1), n * n)
    kappa = _div(exact_agreement(o) - expected, 1.0 - expected)
    return np.where(np.isclose(expected, 1.0), 0.0, kappa)


def weighted_kappa(confusion: np.ndarray, weights: str) -> np.ndarray:
    """1 - sum w_ij O_ij / sum w_ij E_ij with E = r c^T / n and w = |i - j| (``linear``) or (i - j)^2
    (``quadratic``); 0 where sum w E = 0 (both raters constant on the same grade)."""
    o = _table(confusion)
    k = o.shape[-1]
    index = np.arange(k, dtype=np.float64)
    if weights == "linear":
        w = np.abs(index[:, None] - index[None, :])
    elif weights == "quadratic":
        w = (index[:, None] - index[None, :]) ** 2
    else:
        raise ValueError(f"weights must be 'linear' or 'quadratic', got {weights!r}")
    n = o.sum(axis=(-2, -1))
    expected = _div(o.sum(axis=-1)[..., :, None] * o.sum(axis=-2)[..., None, :], n[..., None, None])
    observed_cost = (w * o).sum(axis=(-2, -1))
    expected_cost = (w * expected).sum(axis=(-2, -1))
    return np.where(expected_cost > 0, 1.0 - _div(observed_cost, expected_cost), 0.0)


def krippendorff_alpha(confusion: np.ndarray) -> np.ndarray:
    """Krippendorff's alpha with the ordinal metric, for two raters who graded every unit.

    Coincidences M = O + O^T, n_c their row sums, N = 2n; delta^2_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2;
    alpha = 1 - (N - 1) sum M delta^2 / sum_{c,k} n_c n_k delta^2; NaN where that denominator is 0.
    """
    o = _table(confusion)
    m = o + np.swapaxes(o, -1, -2)
    counts = m.sum(axis=-1)
    cumulative = np.cumsum(counts, axis=-1)
    # sum_{g=min(c,k)}^{max(c,k)} n_g - (n_c + n_k)/2, up to its sign: cum_k - cum_c + (n_c - n_k)/2
    delta2 = (cumulative[..., None, :] - cumulative[..., :, None]
              + (counts[..., :, None] - counts[..., None, :]) / 2.0) ** 2
    total = counts.sum(axis=-1)
    observed = (m * delta2).sum(axis=(-2, -1))
    expected = (counts[..., :, None] * counts[..., None, :] * delta2).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (total - 1.0) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


def binary_confusions(confusion: np.ndarray) -> np.ndarray:
    """The 2x2 confusion at every cut c = 1..K-1 (relevant = category >= c), shape ``(..., K-1, 2, 2)``: rows
    reference (not relevant, relevant), columns judged, in the layout the functions above read."""
    o = _table(confusion)
    k = o.shape[-1]
    out = np.empty((*o.shape[:-2], max(k - 1, 0), 2, 2), dtype=np.float64)
    for c in range(1, k):
        out[..., c - 1, 0, 0] = o[..., :c, :c].sum(axis=(-2, -1))
        out[..., c - 1, 0, 1] = o[..., :c, c:].sum(axis=(-2, -1))
        out[..., c - 1, 1, 0] = o[..., c:, :c].sum(axis=(-2, -1))
        out[..., c - 1, 1, 1] = o[..., c:, c:].sum(axis=(-2, -1))
    return out
