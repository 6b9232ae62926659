"""Plain-text tables for the terminal: ``text_table``, the one layout every run summary goes through (``evret
evaluate``'s scores and slices, ``evret compare``'s table, and every table ``evret rag`` prints, in
``rag_tables``), and the retrieval summaries built on it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from evret_core.contracts.errors import visible
from evret_core.report.common import ppi_cell, slice_cell
from evret_core.results.evaluation import EvaluationResults
from evret_core.statistics.inference import Comparison, format_interval


def text_table(rows: Sequence[Sequence[str]], headers: Sequence[str] | None = None, *, align: str = "",
               widths: Sequence[int] = (), sep: str = "  ", indent: str = "") -> list[str]:
    """The lines of a plain-text table, header first when there is one.

    Column ``i`` is as wide as its widest cell (header included) and at least ``widths[i]``; ``align[i]`` is
    ``<`` (the default) or ``>``; cells are joined by ``sep`` after ``indent``, and each line is right-stripped.
    Every terminal summary of a retrieval or RAG run is laid out here, so a change to the layout applies to all;
    cells are passed through :func:`evret_core.contracts.errors.visible`, so no text from data reaches the terminal raw.
    """
    table = [[visible(cell) for cell in headers]] if headers is not None else []
    table += [[visible(cell) for cell in row] for row in rows]
    count = max((len(row) for row in table), default=0)
    sizes = [max([len(row[i]) for row in table if i < len(row)] + [widths[i] if i < len(widths) else 0])
             for i in range(count)]
    return [(indent + sep.join(cell.rjust(sizes[i]) if align[i:i + 1] == ">" else cell.ljust(sizes[i])
                               for i, cell in enumerate(row))).rstrip() for row in table]


def print_table(rows: Sequence[Sequence[str]], headers: Sequence[str] | None = None, *, file: TextIO,
                suffixes: Sequence[str] = (), align: str = "", widths: Sequence[int] = (), sep: str = "  ",
                indent: str = "") -> None:
    """Print ``text_table(rows, headers, ...)``; ``suffixes[i]`` is appended to row ``i`` (a flag such as
    ``(small)`` or ``*`` after the last column)."""
    lines = text_table(rows, headers, align=align, widths=widths, sep=sep, indent=indent)
    skip = 0 if headers is None else 1
    for i, line in enumerate(lines):
        extra = suffixes[i - skip] if skip <= i < skip + len(suffixes) else ""
        print(line + extra, file=file)


def print_scores(results: EvaluationResults, title: str | None = None, file: TextIO | None = None,
                 sep: str = "  ") -> None:
    """Metric means with their confidence intervals, then slices and unmeasured judgments when there are any.

    ``sep`` is the column separator handed to ``text_table``."""
    out = file or sys.stdout
    if title:
        print(visible(title), file=out)
    width = max([len(m) for m in results.metrics] + [6])
    level = f" ({results.confidence_level:.0%} CI)" if results.intervals and results.confidence_level else ""
    rows = [["-" * width, "-" * max(6, len(level) + 5)]]
    rows += [[m, format_interval(results.scores[m], results.intervals.get(m))] for m in results.metrics]
    print_table(rows, ["metric", f"value{level}"], file=out, widths=[width], sep=sep)
    depth = results.config.get("k")
    uncut = [m for m in results.metrics if "@" not in m.partition("(")[0]]
    if uncut and isinstance(depth, int):  # `recall` reads as many documents as were retrieved: say how many
        print(f"{', '.join(uncut)}: no cutoff, so over each query's top {depth} retrieved documents (retrieval "
              f"depth k={depth})", file=out)
    ppi = [m for m in results.metrics if m in results.prediction_powered]
    if ppi:
        print("prediction-powered (the interval includes the judge's error):", file=out)
        print_table([[m, ppi_cell(results, m)] for m in ppi], file=out, widths=[width], sep=sep)
    print_slices(results, file=out, sep=sep)
    unmeasured = results.stats.get("unmeasured", {})
    if unmeasured.get("judgments"):
        print(
            f"WARNING: {unmeasured['judgments']} judgment(s) unmeasured in {len(unmeasured['queries'])} "
            f"queries (counted as {unmeasured.get('counted_as', 'not matching')})",
            file=out,
        )


def print_slices(results: EvaluationResults, file: TextIO | None = None, max_values: int = 20,
                 sep: str = "  ") -> None:
    """One table per tag: N and each metric per tag value, small slices marked ``(small)``.

    With up to 3 metrics each mean has its interval; with more, only means fit a terminal line (the intervals are
    in the results JSON and in ``evret report``).
    """
    out = file or sys.stdout
    with_ci = len(results.metrics) <= 3
    cell = 21 if with_ci else max([len(m) for m in results.metrics] + [5])
    for tag, values in results.slices.items():
        note = "" if with_ci else " (means; intervals in the results JSON and evret report)"
        print(f"\nslices by {visible(tag)}{note}:", file=out)
        label_width = max([len(visible(v)) for v in values] + [5])
        shown = list(values.items())[:max_values]
        rows = [[value, str(sl.n), *(slice_cell(sl, m) if with_ci or m not in sl.scores else f"{sl.scores[m]:.3f}"
                                     for m in results.metrics)] for value, sl in shown]
        print_table(rows, ["value", "N", *results.metrics], file=out, suffixes=[
            "  (small)" if sl.small else "" for _, sl in shown], align="<>", sep=sep,
            widths=[label_width, 5, *[cell] * len(results.metrics)])
        if len(values) > max_values:
            print(f"... {len(values) - max_values} more values", file=out)


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
    print_table([[m, *(format_interval(scores[r][m], intervals.get(r, {}).get(m)) for r in runs)]
                 for m in comparison.metrics], ["metric", *(r[:cell] for r in runs)], file=out,
                widths=[width, *[cell] * len(runs)])
    print(f"\n{comparison.test} test, Holm-Bonferroni over {len(comparison.pairs)} comparisons, "
          f"{len(comparison.query_ids)} queries; * = p_adjusted < {comparison.alpha:g}", file=out)
    rows = [[p.metric, f"{p.b} vs {p.a}", f"{p.delta:+8.4f}", format_p(p.p_value), format_p(p.p_adjusted),
             f"{p.effect_size:+6.2f}"] for p in comparison.pairs]
    print_table(rows, ["metric", "pair", "delta", "p", "p_adj", "d"], file=out, align="<<>>>>",
                widths=[width, 4, 8, 8, 8, 6], suffixes=[" *" if p.significant else "" for p in comparison.pairs])
    for warning in comparison.warnings:
        print(f"WARNING: {visible(warning)}", file=out)
