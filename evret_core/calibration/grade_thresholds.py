"""Graded calibration: a graded judge against human grades, and thresholds for a judge that grades a score.

:func:`calibrate_graded` grades every labelled (query, passage) pair with the judge and measures the agreement of its
grades with the people's at the label level (:func:`~evret_core.calibration.qrels_agreement.qrels_agreement`: exact
agreement, Cohen's and weighted kappa, Krippendorff's alpha, binary kappa per cut, bootstrap intervals over queries).
For a judge whose grades are thresholds on a score (``query-similarity``), :func:`fit_cuts` fits those thresholds:
for each cut c, the threshold on the score that agrees best with "grade >= c" (binary kappa, or F1), then a running
maximum so that t1 <= t2 <= t3.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from evret_core.calibration.agreement import best_threshold, threshold_sweep
from evret_core.calibration.labels import LabelledJudgment
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import grade_chunk
from evret_core.contracts.judge import reference_free_context


def fit_cuts(scores: Sequence[float] | np.ndarray, grades: Sequence[float] | np.ndarray, top: int,
             by: str = "kappa") -> list[float]:
    """``top`` non-decreasing thresholds on ``scores``: the c-th maximises ``by`` (``kappa`` or ``f1``) of the
    verdicts score >= t against grade >= c (ties: the higher threshold), then a running maximum."""
    s = np.asarray(scores, dtype=np.float64)
    g = np.asarray(grades, dtype=np.float64)
    if s.shape != g.shape or s.size == 0:
        raise EvretError(f"fit_cuts needs one score per grade and at least one pair, got {s.size} scores and "
                         f"{g.size} grades")
    if not np.all(np.isfinite(s)):
        raise EvretError("fit_cuts: every score must be a finite number")
    fitted: list[float] = []
    for cut in range(1, top + 1):
        best = best_threshold(threshold_sweep(s, g >= cut), by)
        assert best is not None  # a non-empty sweep always has a best row
        fitted.append(float(best["threshold"]))
    return [float(v) for v in np.maximum.accumulate(fitted)]


def calibrate_graded(judge: Any, labels: Sequence[LabelledJudgment], *, by: str = "kappa",
                     n_resamples: int = 1000, confidence_level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """The agreement of ``judge``'s grades with the labels' grades (a reference-free graded judge; the JSON of
    ``evret agreement`` without its leaderboard), plus, for a judge with ``thresholds``, the thresholds
    :func:`fit_cuts` fits on its scores (``fitted_thresholds``)."""
    from evret_core.calibration.qrels_agreement import qrels_agreement

    top = getattr(judge, "grades", None)
    name = str(getattr(judge, "name", type(judge).__name__))
    if top is None or not getattr(judge, "reference_free", False):
        raise EvretError(f"judge {name!r}: calibrating against graded (query, passage) labels needs a reference-free "
                         f"graded judge (relevance, query-similarity)")
    if not labels or any(item.grade is None for item in labels):
        raise EvretError("graded calibration needs graded labels (derive_graded_labels)")
    contexts = [reference_free_context(item.query, item.retrieved_text) for item in labels]
    reset = getattr(judge, "reset_stats", None)
    if callable(reset):
        reset()
    given = grade_chunk(judge, contexts)  # checked: one grade per pair, each on the judge's scale
    reference: dict[str, dict[str, float]] = {}
    judged: dict[str, dict[str, float]] = {}
    for item, grade in zip(labels, given, strict=True):
        doc = item.doc_id or item.where
        reference.setdefault(item.query_id, {})[doc] = float(item.grade)  # type: ignore[arg-type]
        if grade is not None:
            judged.setdefault(item.query_id, {})[doc] = grade
    out = qrels_agreement(reference, judged, n_resamples=n_resamples, confidence_level=confidence_level, seed=seed)
    out.pop("leaderboard", None)
    result: dict[str, Any] = {"judge": name, "grades": top, "cut": getattr(judge, "cut", None),
                              "unmeasured": sum(1 for g in given if g is None), "agreement": out}
    if getattr(judge, "thresholds", None) is not None:
        scores = [s for s in judge.batch_score(contexts)]
        measured = [(s, float(item.grade)) for s, item in zip(scores, labels, strict=True)  # type: ignore[arg-type]
                    if s is not None]
        if measured:
            result["fitted_thresholds"] = fit_cuts([s for s, _ in measured], [g for _, g in measured], int(top), by)
            result["thresholds"] = [float(t) for t in judge.thresholds]
    stats = getattr(judge, "stats", None)
    if callable(stats):
        result["stats"] = stats()
    return result
