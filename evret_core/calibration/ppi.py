"""Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, Science 2023) for means.

Judge every query (the cheap, possibly biased metric values ``f``), label a random subset of them (the true
values ``y`` on those queries), and estimate the mean as

    theta = mean(f over all N queries) + mean(y - f over the n labelled ones)

The second term, the *rectifier*, removes the judge's bias as measured on the labelled subset; it is unbiased
whatever the judge does. The interval is a normal interval with

    var(theta) = var(f) / N + var(y - f) / n + 2 cov(f, y - f) / N

which covers both errors: query sampling (the first term) and the judge's error measured on n labels (the
second); the covariance term is there because the labelled queries are among the N judged ones. A good judge
makes ``y - f`` small and the interval nearly as narrow as with every query labelled; a bad one widens it
rather than shifting it.

For a bounded metric (every built-in measure lies in [0, 1]) the estimate and the interval are clipped to the
metric's range: the mean lies in it, so clipping never moves the estimate away from it nor lets the interval miss
it, and a reader never sees ``[0.893, 1.016]`` for a recall. The normal-theory values are kept beside them
(``unclipped_estimate``, ``unclipped_interval``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.statistics.inference import check_confidence_level


@dataclass
class PPIEstimate:
    """A prediction-powered estimate of one mean, beside the judge-only (``judged``) mean."""

    estimate: float
    interval: list[float]
    judged: float
    rectifier: float
    n: int
    n_labelled: int
    confidence_level: float
    # the metric's [low, high] the estimate and interval were clipped to (None: unbounded or unknown), and the
    # normal-theory values before clipping
    value_range: list[float] | None = None
    unclipped_estimate: float | None = None
    unclipped_interval: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite(values: Any, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise EvretError(f"prediction-powered inference: {what} must be a flat list of numbers")
    if not np.all(np.isfinite(array)):
        raise EvretError(f"prediction-powered inference: {what} holds NaN or infinite values")
    return array


def ppi_mean(
    judged: Sequence[float] | np.ndarray,
    labelled_truth: Sequence[float] | np.ndarray,
    labelled_judged: Sequence[float] | np.ndarray,
    confidence_level: float = 0.95,
    labelled_among_judged: bool = True,
    value_range: tuple[float, float] | None = None,
) -> PPIEstimate:
    """The prediction-powered estimate of a mean and its interval.

    :param judged: the judge's value for every one of the N queries
    :param labelled_truth: the true value for each of the n labelled queries
    :param labelled_judged: the judge's value for the same n labelled queries, in the same order
    :param labelled_among_judged: the labelled queries are a random subset of the N judged ones (the usual case);
        False when they are a separate sample (the covariance term is then 0)
    :param value_range: the metric's ``(low, high)``: the estimate and interval are clipped to it (see the module)
    """
    level = check_confidence_level(confidence_level)
    f = _finite(judged, "the judged values")
    y = _finite(labelled_truth, "the labelled true values")
    fl = _finite(labelled_judged, "the labelled judged values")
    if y.shape != fl.shape:
        raise EvretError(f"prediction-powered inference: {len(y)} true values but {len(fl)} judged values for the "
                         f"labelled queries")
    big_n, n = len(f), len(y)
    if n < 2 or big_n < 2:
        raise EvretError(f"prediction-powered inference needs at least 2 labelled and 2 judged queries "
                         f"(got {n} and {big_n})")
    residual = y - fl
    rectifier = float(residual.mean())
    judged_mean = float(f.mean())
    estimate = judged_mean + rectifier
    variance = float(f.var(ddof=1)) / big_n + float(residual.var(ddof=1)) / n
    if labelled_among_judged:
        variance += 2.0 * float(np.cov(fl, residual, ddof=1)[0, 1]) / big_n
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    half = z * math.sqrt(max(variance, 0.0))
    interval = [estimate - half, estimate + half]
    if value_range is None:
        return PPIEstimate(estimate=estimate, interval=interval, judged=judged_mean, rectifier=rectifier, n=big_n,
                           n_labelled=n, confidence_level=level)
    low, high = float(value_range[0]), float(value_range[1])
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise EvretError(f"prediction-powered inference: value_range must be finite (low, high), got {value_range!r}")

    def clip(x: float) -> float:
        return min(max(x, low), high)

    return PPIEstimate(estimate=clip(estimate), interval=[clip(interval[0]), clip(interval[1])], judged=judged_mean,
                       rectifier=rectifier, n=big_n, n_labelled=n, confidence_level=level,
                       value_range=[low, high], unclipped_estimate=estimate, unclipped_interval=interval)


def ppi_for_results(
    results: Any,
    truth: Mapping[str, Mapping[str, float]],
    confidence_level: float | None = None,
    metrics: Sequence[str] | None = None,
) -> dict[str, PPIEstimate]:
    """Prediction-powered estimates for each metric of ``results`` (an EvaluationResults judged by a text
    judge), given the true per-query values of a labelled random subset: ``truth`` maps query id -> metric ->
    value (e.g. the per-query scores of the same run evaluated with ids or human labels on those queries).

    Labelled query ids that are not in ``results`` are an error: the subset must come from the judged queries.
    A metric with a known range (:attr:`Metric.value_range`) gets its estimate and interval clipped to it.
    """
    from evret_core.results.evaluation import metric_value_range

    level = confidence_level if confidence_level is not None else (results.confidence_level or 0.95)
    names = list(metrics) if metrics is not None else list(results.metrics)
    unknown = [qid for qid in truth if qid not in results.per_query]
    if unknown:
        raise EvretError(f"prediction-powered inference: labelled query {unknown[0]!r} is not in the results "
                         f"({len(unknown)} such)")
    out: dict[str, PPIEstimate] = {}
    for metric in names:
        judged = [qr.scores[metric] for qr in results.per_query.values() if metric in qr.scores]
        pairs = [(float(values[metric]), results.per_query[qid].scores[metric])
                 for qid, values in truth.items() if metric in values and metric in results.per_query[qid].scores]
        if len(pairs) < 2:
            continue
        out[metric] = ppi_mean(judged, [p[0] for p in pairs], [p[1] for p in pairs], level,
                               value_range=metric_value_range(metric))
    if not out:
        raise EvretError("prediction-powered inference: no metric has true values for at least 2 labelled queries")
    return out


def add_prediction_powered(
    results: Any,
    truth: Mapping[str, Mapping[str, float]] | Any,
    confidence_level: float | None = None,
) -> Any:
    """Fill ``results.prediction_powered`` (metric -> estimate, interval, judged mean, rectifier, n, n_labelled)
    from a labelled subset, in place, and return ``results``. ``truth`` is query id -> metric -> true value, or an
    EvaluationResults of the same run scored with true labels on the labelled queries: each of its queries must have
    retrieved the documents ``results`` did, in the same order (:func:`check_same_rankings`)."""
    if hasattr(truth, "per_query"):
        check_same_rankings(results, truth)
        truth = {qid: dict(qr.scores) for qid, qr in truth.per_query.items()}
    estimates = ppi_for_results(results, truth, confidence_level)
    results.prediction_powered = {m: e.to_dict() for m, e in estimates.items()}
    return results


def check_same_rankings(results: Any, truth: Any, shown: int = 5) -> None:
    """An :class:`EvretError` naming the queries (the first ``shown`` and the count) whose ranking in ``truth`` is
    not the one ``results`` holds: the rectifier measures the judge's error on the judged run's own rankings, and a
    truth scored on another run (another retriever, other settings, another depth) would correct it by the
    difference between two rankings instead, silently."""
    differing = [qid for qid, labelled in truth.per_query.items() if qid in results.per_query
                 and list(labelled.retrieved_ids) != list(results.per_query[qid].retrieved_ids)]
    if differing:
        named = ", ".join(repr(q) for q in differing[:shown]) + (", ..." if len(differing) > shown else "")
        raise EvretError(f"prediction-powered inference: the truth ranks other documents than the judged run for "
                         f"{len(differing)} of {len(truth.per_query)} labelled queries ({named}); the truth must be "
                         f"the judged run's own rankings scored with true labels (the same retriever and settings, "
                         f"or a --run file of its rankings)")
