"""Agreement between binary verdicts and true labels: accuracy, precision, recall, F1, Cohen's kappa.

Everything is computed from the four confusion counts, as arrays, so one formula serves a single table, every
bootstrap resample and every threshold of a sweep. Conventions for the degenerate cases (documented in
docs/calibration.md): precision is 0 with no positive verdict, recall 0 with no positive label, F1 0 when
precision + recall is 0, and kappa 0 when chance agreement is 1 (both sides constant: kappa is undefined there,
and such a judge has shown nothing beyond chance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evret_core.statistics.inference import check_confidence_level, check_resamples

MEASURES = ("accuracy", "precision", "recall", "f1", "kappa")


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


def measures_from_counts(tp: Any, fp: Any, fn: Any, tn: Any) -> dict[str, np.ndarray]:
    """Each measure of :data:`MEASURES` from confusion counts (scalars or arrays of the same shape)."""
    tp, fp, fn, tn = (np.asarray(x, dtype=np.float64) for x in (tp, fp, fn, tn))
    n = tp + fp + fn + tn
    accuracy = _div(tp + tn, n)
    precision = _div(tp, tp + fp)
    recall = _div(tp, tp + fn)
    f1 = _div(2 * tp, 2 * tp + fp + fn)
    # chance agreement: P(both say yes by chance) + P(both say no by chance)
    expected = _div((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn), n * n)
    kappa = _div(accuracy - expected, 1.0 - expected)
    kappa = np.where(np.isclose(expected, 1.0), 0.0, kappa)
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1, "kappa": kappa}


def confusion(predicted: np.ndarray, truth: np.ndarray) -> tuple[int, int, int, int]:
    """``(tp, fp, fn, tn)`` of boolean arrays."""
    p, t = np.asarray(predicted, dtype=bool), np.asarray(truth, dtype=bool)
    return (int(np.sum(p & t)), int(np.sum(p & ~t)), int(np.sum(~p & t)), int(np.sum(~p & ~t)))


@dataclass
class Agreement:
    """How well verdicts agree with labels, with a bootstrap interval on kappa."""

    n: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    kappa: float
    kappa_interval: list[float]
    confusion: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def agreement(
    predicted: Sequence[bool] | np.ndarray,
    truth: Sequence[bool] | np.ndarray,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Agreement:
    """Agreement of ``predicted`` with ``truth`` (same length), kappa's interval a percentile bootstrap over
    judgments (resampled with replacement, ``seed`` for repeatability)."""
    level = check_confidence_level(confidence_level)
    n_resamples = check_resamples(n_resamples)
    p = np.asarray(predicted, dtype=bool)
    t = np.asarray(truth, dtype=bool)
    if p.shape != t.shape or p.ndim != 1:
        raise ValueError("predicted and truth must be 1-d and of the same length")
    tp, fp, fn, tn = confusion(p, t)
    point = {k: float(v) for k, v in measures_from_counts(tp, fp, fn, tn).items()}
    interval = [point["kappa"], point["kappa"]]
    n = len(p)
    if n >= 2:
        rng = np.random.default_rng(seed)
        # one code per judgment (0..3 = tn, fn, fp, tp); a resample's counts are a bincount of its codes
        codes = p.astype(np.int64) * 2 + t.astype(np.int64)
        kappas = np.empty(n_resamples)
        step = max(1, 2_000_000 // n)
        for start in range(0, n_resamples, step):
            stop = min(n_resamples, start + step)
            drawn = codes[rng.integers(0, n, size=(stop - start, n))]
            counts = [np.sum(drawn == c, axis=1) for c in (3, 2, 1, 0)]
            kappas[start:stop] = measures_from_counts(*counts)["kappa"]
        alpha = 1.0 - level
        low, high = np.percentile(kappas, [100 * alpha / 2, 100 * (1 - alpha / 2)])
        interval = [float(low), float(high)]
    return Agreement(n=n, kappa_interval=interval, confusion={"tp": tp, "fp": fp, "fn": fn, "tn": tn}, **point)


def threshold_sweep(
    scores: Sequence[float] | np.ndarray, truth: Sequence[bool] | np.ndarray, max_points: int = 200
) -> list[dict[str, float]]:
    """Every measure at each candidate threshold (verdict = score >= threshold), ascending.

    Candidates are the distinct scores (at most ``max_points`` of them, evenly spread by quantile), so each
    candidate is a threshold at which some verdict changes.
    """
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(truth, dtype=bool)
    if s.size == 0:
        return []
    candidates = np.unique(s)
    if candidates.size > max_points:
        candidates = np.unique(np.quantile(s, np.linspace(0.0, 1.0, max_points), method="lower"))
    predicted = s[None, :] >= candidates[:, None]
    tp = np.sum(predicted & t, axis=1)
    fp = np.sum(predicted & ~t, axis=1)
    fn = np.sum(~predicted & t, axis=1)
    tn = np.sum(~predicted & ~t, axis=1)
    table = measures_from_counts(tp, fp, fn, tn)
    return [{"threshold": float(c), **{m: float(table[m][i]) for m in MEASURES}}
            for i, c in enumerate(candidates)]


def best_threshold(sweep: Sequence[dict[str, float]], by: str = "f1") -> dict[str, float] | None:
    """The sweep row with the highest ``by`` (``f1`` or ``kappa``); ties go to the higher threshold (the
    stricter judge, fewer false matches)."""
    if by not in ("f1", "kappa"):
        from evret_core.contracts.errors import EvretError

        raise EvretError(f"best threshold: choose by 'f1' or 'kappa', got {by!r}")
    if not sweep:
        return None
    return max(sweep, key=lambda row: (row[by], row["threshold"]))


def threshold_row(scores: Sequence[float] | np.ndarray, truth: Sequence[bool] | np.ndarray,
                  threshold: float) -> dict[str, float]:
    """A sweep row for any threshold: every measure of the verdicts ``score >= threshold``."""
    table = measures_from_counts(*confusion(np.asarray(scores, dtype=np.float64) >= threshold, np.asarray(truth)))
    return {"threshold": float(threshold), **{m: float(table[m]) for m in MEASURES}}


def settle_threshold(best: dict[str, float], scores: Sequence[float] | np.ndarray,
                     truth: Sequence[bool] | np.ndarray, by: str, keep: Sequence[float] = ()) -> dict[str, float]:
    """The threshold to recommend for ``best`` (a sweep row, by ``by``): the first of ``keep`` (the threshold in
    use) that scores as well, so a tie changes nothing the user has; else the roundest value that gives
    ``best``'s very verdicts (the shortest decimal above the next lower score, at most ``best``'s)."""
    for value in keep:
        row = threshold_row(scores, truth, value)
        if row[by] >= best[by] - 1e-12:  # both from integer counts by one formula: equal verdicts, equal floats
            return row
    s = np.asarray(scores, dtype=np.float64)
    below = s[s < best["threshold"]]
    return {**best, "threshold": _round_between(float(below.max()) if below.size else -np.inf, best["threshold"])}


def _round_between(low: float, high: float) -> float:
    """The shortest decimal in ``(low, high]`` (rounding ``high`` down, one more digit at a time)."""
    from decimal import ROUND_FLOOR, Decimal

    exact = Decimal(repr(high))
    for digits in range(18):
        value = float(exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_FLOOR))
        if low < value <= high:
            return value
    return high
