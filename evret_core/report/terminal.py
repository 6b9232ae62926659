"""Plain-text tables for the terminal."""

from __future__ import annotations

import sys
from typing import TextIO

from evret_core.report.common import ppi_cell
from evret_core.results.evaluation import EvaluationResults
from evret_core.statistics.inference import Comparison, format_interval


def print_scores(results: EvaluationResults, title: str | None = None, file: TextIO | None = None) -> None:
    """Metric means with their confidence intervals, then slices and unmeasured judgments when there are any."""
    out = file or sys.stdout
    if title:
        print(title, file=out)
    width = max((len(m) for m in results.metrics), default=6)
    level = f" ({results.confidence_level:.0%} CI)" if results.intervals and results.confidence_level else ""
    print(f"{'metric'.ljust(width)}  value{level}", file=out)
    print(f"{'-' * width}  {'-' * max(6, len(level) + 5)}", file=out)
    for metric in results.metrics:
        value = format_interval(results.scores[metric], results.intervals.get(metric))
        print(f"{metric.ljust(width)}  {value}", file=out)
    ppi = [m for m in results.metrics if m in results.prediction_powered]
    if ppi:
        print("prediction-powered (the interval includes the judge's error):", file=out)
        for metric in ppi:
            print(f"{metric.ljust(width)}  {ppi_cell(results, metric)}", file=out)
    print_slices(results, file=out)
    unmeasured = results.stats.get("unmeasured", {})
    if unmeasured.get("judgments"):
        print(
            f"WARNING: {unmeasured['judgments']} judgment(s) unmeasured in {len(unmeasured['queries'])} "
            f"queries (counted as {unmeasured.get('counted_as', 'not matching')})",
            file=out,
        )


def print_slices(results: EvaluationResults, file: TextIO | None = None, max_values: int = 20) -> None:
    """One table per tag: N and each metric per tag value, small slices marked ``(small)``.

    With up to 3 metrics each mean has its interval; with more, only means fit a terminal line (the intervals are
    in the results JSON and in ``evret report``).
    """
    out = file or sys.stdout
    with_ci = len(results.metrics) <= 3
    cell = 21 if with_ci else max([len(m) for m in results.metrics] + [5])
    for tag, values in results.slices.items():
        note = "" if with_ci else " (means; intervals in the results JSON and evret report)"
        print(f"\nslices by {tag}{note}:", file=out)
        label_width = max([len(v) for v in values] + [5])
        header = f"{'value'.ljust(label_width)}  {'N':>5}  " + "  ".join(m.ljust(cell) for m in results.metrics)
        print(header.rstrip(), file=out)
        for shown, (value, sl) in enumerate(values.items()):
            if shown == max_values:
                print(f"... {len(values) - max_values} more values", file=out)
                break
            cells = "  ".join(
                (format_interval(sl.scores[m], sl.intervals.get(m)) if with_ci else f"{sl.scores[m]:.3f}").ljust(cell)
                for m in results.metrics)
            flag = "  (small)" if sl.small else ""
            print(f"{value.ljust(label_width)}  {sl.n:>5}  {cells}".rstrip() + flag, file=out)


def format_p(p: float) -> str:
    """A p-value in at most 8 characters: ``0.0312``, or ``2.1e-06`` when tiny."""
    return f"{p:.1e}" if 0 < p < 1e-4 else f"{p:.4f}"


def print_comparison(
    comparison: Comparison,
    scores: dict[str, dict[str, float]],
    intervals: dict[str, dict[str, list[float]]],
    file: TextIO | None = None,
) -> None:
    """The runs' means per metric, then each pair's delta and adjusted p-value; ``*`` marks significant ones."""
    out = file or sys.stdout
    runs = comparison.runs
    width = max([len(m) for m in comparison.metrics] + [6])
    cell = 21
    print((f"{'metric'.ljust(width)}  " + "  ".join(r[:cell].ljust(cell) for r in runs)).rstrip(), file=out)
    for metric in comparison.metrics:
        cells = [format_interval(scores[r][metric], intervals.get(r, {}).get(metric)).ljust(cell) for r in runs]
        print((f"{metric.ljust(width)}  " + "  ".join(cells)).rstrip(), file=out)
    print(f"\n{comparison.test} test, Holm-Bonferroni over {len(comparison.pairs)} comparisons, "
          f"{len(comparison.query_ids)} queries; * = p_adjusted < {comparison.alpha:g}", file=out)
    pair_width = max([len(f"{p.b} vs {p.a}") for p in comparison.pairs] + [4])
    print(f"{'metric'.ljust(width)}  {'pair'.ljust(pair_width)}  {'delta':>8}  {'p':>8}  {'p_adj':>8}  "
          f"{'d':>6}", file=out)
    for p in comparison.pairs:
        mark = " *" if p.significant else ""
        print(f"{p.metric.ljust(width)}  {f'{p.b} vs {p.a}'.ljust(pair_width)}  {p.delta:+8.4f}  "
              f"{format_p(p.p_value):>8}  {format_p(p.p_adjusted):>8}  {p.effect_size:+6.2f}{mark}", file=out)
    for warning in comparison.warnings:
        print(f"WARNING: {warning}", file=out)
