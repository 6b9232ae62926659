"""Judge scores in [0, 1] and thresholds, for calibration and the cascade (shared contract 2).

A judge that implements the contract has ``threshold: float | None`` and ``batch_score(contexts)``; for the
thresholded judges that predate it, the score they threshold is computed here (token-overlap's overlap ratio,
the semantic judge's cosine), so that ``judge(c) == (score >= threshold)`` holds either way. Any other judge's
verdicts map to 1.0 / 0.0, and a judgment it could not make to None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.judge import JudgmentContext

# the constructor option that holds the threshold, by judge name (for saving a calibrated threshold)
THRESHOLD_OPTIONS = {"token-overlap": "overlap_ratio", "semantic": "threshold"}


def judge_name(judge: Any) -> str:
    """The registered name of ``judge`` (its ``name`` attribute), else its class name."""
    return str(getattr(judge, "name", None) or type(judge).__name__)


def judge_threshold(judge: Any) -> float | None:
    """The threshold a judge compares its score with, or None when it has none (exact, contains, llm)."""
    from evret_core.judge.lexical import TokenOverlapJudge

    value = getattr(judge, "threshold", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(judge, TokenOverlapJudge):
        return judge.overlap_ratio
    return None


def threshold_option(judge: Any) -> str | None:
    """The option name that sets ``judge``'s threshold (``threshold``, ``overlap_ratio``), when known."""
    if judge_threshold(judge) is None:
        return None
    name = judge_name(judge)
    if name in THRESHOLD_OPTIONS:
        return THRESHOLD_OPTIONS[name]
    return "threshold"


def _clip(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return None
    return min(1.0, max(0.0, value))


def judge_scores(judge: Any, contexts: Sequence[JudgmentContext]) -> list[float | None]:
    """One score in [0, 1] per context (None: the judgment could not be made), in order.

    Uses ``judge.batch_score`` when the judge has it; otherwise the score the judge thresholds when it is one
    of the built-in thresholded judges; otherwise its verdicts as 1.0 / 0.0.
    """
    if not contexts:
        return []
    batch_score = getattr(judge, "batch_score", None)
    if callable(batch_score):
        got = list(batch_score(contexts))
    else:
        got = _legacy_scores(judge, contexts)
    if len(got) != len(contexts):
        from evret_core.contracts.errors import EvretError

        raise EvretError(f"judge {judge_name(judge)!r} returned {len(got)} scores for {len(contexts)} contexts")
    return [_clip(s) for s in got]


def _legacy_scores(judge: Any, contexts: Sequence[JudgmentContext]) -> list[Any]:
    """Scores of a judge without ``batch_score``: a thresholded similarity when it has one, else its verdicts."""
    similarities = getattr(judge, "similarities", None)
    if callable(similarities) and judge_threshold(judge) is not None:
        return [float(s) for s in similarities(contexts)]
    return [None if v is None else (1.0 if v else 0.0) for v in judge.batch_judge(contexts)]
