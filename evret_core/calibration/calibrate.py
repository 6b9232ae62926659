"""Calibrate judges against labelled judgments: agreement, trivial baselines, threshold sweep."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evret_core.calibration.agreement import (
    Agreement,
    agreement,
    best_threshold,
    settle_threshold,
    threshold_sweep,
)
from evret_core.calibration.labels import LabelledJudgment, labelled_only
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.io.redact import redact
from evret_core.judge.thresholds import judge_name, judge_scores, judge_threshold, threshold_option


@dataclass
class JudgeCalibration:
    """One judge measured against the labels: its agreement, the baselines it must beat, and for a thresholded
    judge the sweep over thresholds and the best one."""

    judge: str
    config: dict[str, Any]
    agreement: Agreement
    baselines: dict[str, Agreement]
    unmeasured: int = 0
    threshold: float | None = None
    threshold_option: str | None = None
    sweep: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] | None = None
    best_by: str = "f1"
    # the scores and labels the sweep was made of, to settle another threshold against it (not in to_dict)
    scored: tuple[list[float], list[bool]] = field(default=([], []), repr=False)

    def settle(self, keep: Sequence[float] = ()) -> dict[str, float]:
        """:attr:`best` settled (:func:`~evret_core.calibration.agreement.settle_threshold`): the first threshold of
        ``keep`` that scores as well, else the roundest value with the best verdicts."""
        if self.best is None:
            raise EvretError(f"judge {self.judge!r} has no threshold sweep to settle")
        return settle_threshold(self.best, *self.scored, self.best_by, keep)

    @property
    def beats_baselines(self) -> bool:
        """True when the judge's kappa and F1 are above both trivial baselines'."""
        return all(self.agreement.kappa > b.kappa and self.agreement.f1 >= b.f1 for b in self.baselines.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "config": redact(self.config),  # an LLM judge's base_url may carry credentials
            "agreement": self.agreement.to_dict(),
            "baselines": {k: v.to_dict() for k, v in self.baselines.items()},
            "beats_baselines": self.beats_baselines,
            "unmeasured": self.unmeasured,
            "threshold": self.threshold,
            "threshold_option": self.threshold_option,
            "best_by": self.best_by,
            "best": self.best,
            # plot data for reports: one point per candidate threshold
            "sweep": self.sweep,
        }


def unit_scores(judge: Any, labels: Sequence[LabelledJudgment]) -> list[float | None]:
    """The judge's score for each labelled judgment: the maximum over its expected strings (None when the
    judge could make none of them). Each distinct context is scored once."""
    contexts: dict[JudgmentContext, None] = {}
    for item in labels:
        for c in item.contexts():
            contexts.setdefault(c, None)
    ordered = list(contexts)
    scored = dict(zip(ordered, judge_scores(judge, ordered), strict=True))
    out: list[float | None] = []
    for item in labels:
        values = [v for v in (scored[c] for c in item.contexts()) if v is not None]
        out.append(max(values) if values else None)
    return out


def unit_verdicts(judge: Any, labels: Sequence[LabelledJudgment],
                  scores: Sequence[float | None] | None = None) -> list[bool | None]:
    """The judge's verdict per labelled judgment: its score against its threshold when it has one, else
    ``batch_judge`` (any expected string matching)."""
    threshold = judge_threshold(judge)
    if threshold is not None:
        scores = unit_scores(judge, labels) if scores is None else scores
        return [None if s is None else s >= threshold for s in scores]
    contexts: dict[JudgmentContext, None] = {}
    for item in labels:
        for c in item.contexts():
            contexts.setdefault(c, None)
    ordered = list(contexts)
    verdicts = dict(zip(ordered, judge.batch_judge(ordered), strict=True))
    out: list[bool | None] = []
    for item in labels:
        got = [verdicts[c] for c in item.contexts()]
        out.append(True if any(v is True for v in got) else (None if any(v is None for v in got) else False))
    return out


def calibrate_judge(
    judge: Any,
    labels: Sequence[LabelledJudgment],
    by: str = "f1",
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> JudgeCalibration:
    """Measure one judge (an object or a registered name) against the labelled judgments of ``labels``
    (rows without a label are skipped). Judgments the judge could not make are counted, not scored."""
    if isinstance(judge, str):
        from evret_core.plugins.registry import create_judge

        judge = create_judge(judge)
    items = labelled_only(labels)
    if not items:
        raise EvretError("calibration needs labelled judgments; every 'label' is null")
    threshold = judge_threshold(judge)
    scores = unit_scores(judge, items) if threshold is not None else None
    verdicts = unit_verdicts(judge, items, scores)
    keep = [i for i, v in enumerate(verdicts) if v is not None]
    truth = np.array([items[i].label for i in keep], dtype=bool)
    predicted = np.array([verdicts[i] for i in keep], dtype=bool)
    kw: dict[str, Any] = {"confidence_level": confidence_level, "n_resamples": n_resamples, "seed": seed}
    config_fn = getattr(judge, "config", None)
    result = JudgeCalibration(
        judge=judge_name(judge),
        config=config_fn() if callable(config_fn) else {"name": judge_name(judge)},
        agreement=agreement(predicted, truth, **kw),
        baselines={"always_yes": agreement(np.ones_like(truth), truth, **kw),
                   "always_no": agreement(np.zeros_like(truth), truth, **kw)},
        unmeasured=len(verdicts) - len(keep),
        threshold=threshold,
        threshold_option=threshold_option(judge),
        best_by=by,
    )
    if scores is not None:
        s = np.array([scores[i] for i in keep], dtype=np.float64)
        result.sweep = threshold_sweep(s, truth)
        result.scored = (s.tolist(), truth.tolist())
    result.best = best_threshold(result.sweep, by) if result.sweep else None
    if result.best is not None:  # a tie keeps the judge's own threshold; a new one is written round
        result.best = result.settle(keep=[threshold] if threshold is not None else [])
    return result


def calibrate(
    judges: Sequence[Any],
    labels: Sequence[LabelledJudgment],
    by: str = "f1",
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> list[JudgeCalibration]:
    """:func:`calibrate_judge` for each judge, on the same labels."""
    if not judges:
        raise EvretError("calibration needs at least one judge")
    return [calibrate_judge(j, labels, by, confidence_level, n_resamples, seed) for j in judges]


def calibration_json(results: Sequence[JudgeCalibration], labels: Sequence[LabelledJudgment]) -> dict[str, Any]:
    """The JSON document of a calibration run (``evret calibrate --json``)."""
    items = labelled_only(labels)
    return {
        "labels": {"rows": len(labels), "labelled": len(items), "positive": sum(1 for i in items if i.label),
                   "unlabelled": len(labels) - len(items)},
        "judges": [r.to_dict() for r in results],
    }
