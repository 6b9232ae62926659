"""Regression gates: fail a CI job when a metric falls under a floor, or significantly below a baseline run.

A gate that fails is not bad input: the CLI exits 1 for it (and 2, as always, for bad input). A floor compares the
run's mean with a number; a baseline comparison uses the paired test Evret already has (Holm-Bonferroni corrected
over the metrics checked) and fails only when the drop is both significant at ``alpha`` and at least
``min_effect``, so a noisy judge or a small dataset does not make CI flaky. Every metric here is
higher-is-better (the IR measures, the RAG scores); a gate on a count such as ``num_ret`` reads the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.statistics.inference import TESTS, holm_bonferroni, paired_p_value


class ScoredRun(Protocol):
    """What a gate reads from a run: means, intervals and per-query scores (EvaluationResults has them)."""

    scores: dict[str, float]
    intervals: dict[str, list[float]]

    def per_query_scores(self) -> dict[str, dict[str, float]]: ...


@dataclass
class GateFailure:
    """One failed gate: the metric and a one-line reason a person can act on."""

    metric: str
    reason: str
    worst: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class GateReport:
    """The outcome of every gate checked: ``passed`` when nothing failed."""

    checked: list[str]
    failures: list[GateFailure]

    @property
    def passed(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        """One line per failed gate."""
        return [f"FAILED {f.metric}: {f.reason}" for f in self.failures]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checked": self.checked,
                "failures": [{"metric": f.metric, "reason": f.reason} for f in self.failures]}


def parse_fail_under(specs: Iterable[str], option: str = "--fail-under") -> dict[str, float]:
    """``["recall@5=0.8", "mrr@10=0.7"]`` -> ``{"recall@5": 0.8, "mrr@10": 0.7}``; bad specs name the option."""
    floors: dict[str, float] = {}
    for spec in specs:
        metric, sep, value = str(spec).rpartition("=")
        metric = metric.strip()
        if not sep or not metric:
            raise EvretError(f"{option} {spec!r}: expected METRIC=VALUE, e.g. recall@5=0.8")
        try:
            floor = float(value)
        except ValueError:
            raise EvretError(f"{option} {spec!r}: {value!r} is not a number") from None
        if not math.isfinite(floor):
            raise EvretError(f"{option} {spec!r}: the floor must be a finite number")
        if metric in floors:
            raise EvretError(f"{option}: {metric} is given twice")
        floors[metric] = floor
    return floors


def _interval_text(run: ScoredRun, metric: str) -> str:
    interval = run.intervals.get(metric) if run.intervals else None
    return f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval and len(interval) == 2 else ""


def worst_queries(run: ScoredRun, metric: str, n: int = 5) -> list[tuple[str, float]]:
    """The ``n`` queries with the lowest ``metric``, lowest first (ties in query order)."""
    per_query = run.per_query_scores()
    values = [(qid, scores[metric]) for qid, scores in per_query.items() if metric in scores]
    return sorted(values, key=lambda item: item[1])[:n]


def check_fail_under(run: ScoredRun, floors: Mapping[str, float], worst: int = 5) -> list[GateFailure]:
    """A failure for each metric whose mean is under its floor; a metric the run lacks is an error."""
    missing = [m for m in floors if m not in run.scores]
    if missing:
        raise EvretError(f"--fail-under names {', '.join(missing)}, which the run did not compute "
                         f"(it has: {', '.join(run.scores) or 'none'}); add the metric with --metric")
    failures = []
    for metric, floor in floors.items():
        value = run.scores[metric]
        if not math.isfinite(value):
            raise EvretError(f"the run's {metric} is {value!r}; a floor needs a finite score")
        if not value >= floor:  # NaN fails too
            failures.append(GateFailure(
                metric, f"{value:.4f}{_interval_text(run, metric)} is under the floor {floor:g}",
                worst_queries(run, metric, worst)))
    return failures


def check_regression(
    run: ScoredRun,
    baseline: ScoredRun,
    metrics: Sequence[str] | None = None,
    alpha: float = 0.05,
    min_effect: float = 0.0,
    test: str = "randomization",
    n_resamples: int = 10000,
    seed: int = 0,
    worst: int = 5,
) -> list[GateFailure]:
    """A failure for each metric significantly worse than in ``baseline`` by at least ``min_effect``.

    The runs must score the same queries (a changed dataset is bad input, not a regression); a metric is compared on
    the queries that have a value for it in both runs (a RAG score that does not apply to a question is absent).
    p-values are Holm-Bonferroni adjusted over the metrics checked. ``metrics`` defaults to every metric both runs
    have.
    """
    if test not in TESTS:
        raise EvretError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if not (math.isfinite(min_effect) and min_effect >= 0):
        raise EvretError(f"--min-effect must be a finite number >= 0, got {min_effect}")
    if not 0.0 < alpha < 1.0:
        raise EvretError(f"alpha must be between 0 and 1, got {alpha}")
    names = list(metrics) if metrics is not None else [m for m in run.scores if m in baseline.scores]
    for metric in names:
        for label, side in (("the run", run), ("the baseline", baseline)):
            if metric not in side.scores:
                raise EvretError(f"{label} has no {metric!r} score; the regression gate needs it in both runs")
    if not names:
        raise EvretError("the run and the baseline have no metric in common")
    current, before = run.per_query_scores(), baseline.per_query_scores()
    if set(current) != set(before):
        only_run, only_base = sorted(set(current) - set(before)), sorted(set(before) - set(current))
        raise EvretError(f"the run and the baseline score different queries ({len(only_run)} only in the run, "
                         f"e.g. {only_run[:3]}; {len(only_base)} only in the baseline, e.g. {only_base[:3]}); "
                         f"a regression gate compares the same queries")
    tested = []
    for metric in names:
        qids = [q for q in before if metric in before[q] and metric in current[q]]
        if len(qids) < 2:
            continue
        a = np.array([before[q][metric] for q in qids], dtype=np.float64)
        b = np.array([current[q][metric] for q in qids], dtype=np.float64)
        for label, values in (("the baseline", a), ("the run", b)):
            bad = np.flatnonzero(~np.isfinite(values))
            if len(bad):  # NaN compares false with everything: a gate over it would pass whatever happened
                raise EvretError(f"{label}: query {qids[bad[0]]!r} has {metric} = {float(values[bad[0]])!r} "
                                 f"({len(bad)} such value(s)); a gate needs finite scores")
        diff = b - a
        p_value = paired_p_value(a, b, test, n_resamples, seed)
        if not math.isfinite(p_value):
            raise EvretError(f"{metric}: the {test} test gave p = {p_value!r}; a gate never passes on an "
                             f"undefined p-value")
        tested.append((metric, qids, diff, p_value))
    untestable = [m for m in (metrics or []) if m not in {t[0] for t in tested}]
    if untestable:
        raise EvretError(f"{', '.join(untestable)}: fewer than 2 queries have a value in both runs, so no paired "
                         f"test is possible (an aggregate rate such as wrong_refusal_rate can be gated with "
                         f"--fail-under)")
    adjusted = holm_bonferroni([p for *_rest, p in tested])
    failures = []
    for (metric, qids, diff, _p), p_adjusted in zip(tested, adjusted, strict=True):
        delta = float(diff.mean())
        if p_adjusted < alpha and delta < 0 and delta <= -min_effect:
            order = np.argsort(diff, kind="stable")[:worst]
            drops = [(qids[i], float(diff[i])) for i in order if diff[i] < 0]
            failures.append(GateFailure(
                metric,
                f"{run.scores[metric]:.4f}{_interval_text(run, metric)} is significantly below the baseline's "
                f"{baseline.scores[metric]:.4f}{_interval_text(baseline, metric)} (delta {delta:+.4f} over "
                f"{len(qids)} queries, p={p_adjusted:.3g} Holm-adjusted, {test} test, alpha {alpha:g}, "
                f"min effect {min_effect:g})",
                drops))
    return failures


def check_gates(
    run: ScoredRun,
    fail_under: Mapping[str, float] | None = None,
    baseline: ScoredRun | None = None,
    **regression: Any,
) -> GateReport:
    """Every gate at once: floors, then the baseline comparison (keyword arguments of :func:`check_regression`)."""
    floors = dict(fail_under or {})
    failures = check_fail_under(run, floors) if floors else []
    checked = list(floors)
    if baseline is not None:
        failures += check_regression(run, baseline, **regression)
        metrics = regression.get("metrics")
        checked += [m for m in (metrics or [m for m in run.scores if m in baseline.scores]) if m not in checked]
    return GateReport(checked=checked, failures=failures)
