"""What every report format shows, computed once: the runs, their curves and the comparison of the runs (retrieval:
`ReportData`; RAG: `RagReportData`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from evret_core.contracts.errors import EvretError, visible
from evret_core.progress import current_progress, report_progress
from evret_core.results.evaluation import EvaluationResults, SliceResult
from evret_core.statistics.inference import Comparison, compare_scores, format_interval

if TYPE_CHECKING:
    from evret_core.rag.questions.question_sets import QuestionSet
    from evret_core.results.rag_results import RagResults

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (which cannot be written as UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


@dataclass
class ReportData:
    """The runs of a report (name -> results), in order, with the comparison when there are several."""

    runs: dict[str, EvaluationResults]
    comparison: Comparison | None = None
    curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what a renderer had to leave out (evret report prints them)

    @property
    def names(self) -> list[str]:
        return list(self.runs)


@dataclass
class RagReportData:
    """The RAG runs of a report (name -> results), in order, with their comparison when there are several and the
    question set they used (the HTML drill-down then shows each context's text). Rendered by the same entry point
    and renderers as :class:`ReportData` (:func:`evret_core.report.render.render_report`)."""

    runs: dict[str, RagResults]
    comparison: Comparison | None = None
    questions: QuestionSet | None = None
    warnings: list[str] = field(default_factory=list)  # what a renderer had to leave out (evret report prints them)
    title: str = ""  # the HTML page's subtitle; default: the run names

    @property
    def names(self) -> list[str]:
        return list(self.runs)


def ppi_cell(results: EvaluationResults, metric: str, escape: Callable[[str], str] = visible) -> str:
    """A run's prediction-powered estimate of ``metric`` with its interval and labelled count, or "-"; the count
    goes through ``escape`` (the format's escaping: a file is checked on load, results built in Python are not)."""
    entry = results.prediction_powered.get(metric)
    if not isinstance(entry, dict) or not isinstance(entry.get("estimate"), (int, float)):
        return "-"
    interval = entry.get("interval")
    shown = interval if isinstance(interval, list) and len(interval) == 2 else None
    return f"{format_interval(float(entry['estimate']), shown)} ({escape(str(entry.get('n_labelled', '?')))} labelled)"


def ppi_rows(data: ReportData, escape: Callable[[str], str] = visible) -> list[tuple[str, list[str]]]:
    """(metric, a cell per run) for each metric some run has a prediction-powered estimate of (see
    :mod:`evret_core.calibration.ppi`); empty when no run has any."""
    return [(m, [ppi_cell(r, m, escape) for r in data.runs.values()]) for m in data.metrics
            if any(m in r.prediction_powered for r in data.runs.values())]


def slice_cell(sliced: SliceResult, metric: str) -> str:
    """A slice's mean of ``metric`` with its interval, or ``n/a`` when the slice lacks the metric."""
    if metric not in sliced.scores:
        return "n/a"
    return format_interval(sliced.scores[metric], sliced.intervals.get(metric))


PPI_NOTE = ("prediction-powered estimates and intervals: the judged scores rectified by a labelled subset, so the "
            "interval includes the judge's error (evret calibrate --ppi-truth)")


def common_metrics(runs: dict[str, EvaluationResults]) -> list[str]:
    """The metrics every run has, in the first run's order."""
    first = next(iter(runs.values()))
    return [m for m in first.metrics if all(m in r.scores for r in runs.values())]


def compare_runs(
    runs: dict[str, EvaluationResults],
    test: str = "t",
    alpha: float = 0.05,
    n_resamples: int = 10000,
    seed: int = 0,
    intersection: bool = False,
) -> Comparison:
    """Paired comparison of every pair of runs on their common metrics (see :func:`evret_core.statistics.inference.compare_scores`)."""
    metrics = common_metrics(runs)
    if not metrics:
        raise EvretError("the runs have no metric in common")
    comparison = compare_scores({name: r.per_query_scores() for name, r in runs.items()}, metrics, test=test,
                                alpha=alpha, n_resamples=n_resamples, seed=seed, intersection=intersection,
                                progress=current_progress())
    hashes = {name: (r.manifest.dataset.get("hash") if r.manifest else None) for name, r in runs.items()}
    known = {h for h in hashes.values() if h}
    if len(known) > 1:
        comparison.warnings.append(
            "the runs were scored on different datasets (dataset hashes differ: "
            + ", ".join(f"{n}={str(h)[:12] if h else '?'}" for n, h in hashes.items()) + ")"
        )
    return comparison


def build_report_data(
    runs: dict[str, EvaluationResults], test: str = "t", alpha: float = 0.05, seed: int = 0,
    max_k: int | None = None,
) -> ReportData:
    """Curves for every run and, with two or more runs, their comparison (on common queries, with a warning
    when the query sets differ: a report shows what it can rather than failing)."""
    comparison = compare_runs(runs, test=test, alpha=alpha, seed=seed, intersection=True) if len(runs) > 1 else None
    progress = current_progress()
    curves = {}
    report_progress(progress, "curves", 0, len(runs))
    for done, (name, r) in enumerate(runs.items(), start=1):
        curves[name] = r.metric_curves(max_k)
        report_progress(progress, "curves", done, len(runs))
    return ReportData(runs=runs, comparison=comparison, curves=curves, metrics=common_metrics(runs))
