"""The tables of agent-trace results (per hop index, outcomes, first lost hop, hops, slices by tag), as cells of
text: the terminal (``evret trace``), the Markdown and the HTML report (``evret report``) all print these cells, so
they show one number for one quantity."""

from __future__ import annotations

from dataclasses import dataclass, field

from evret_core.contracts.errors import visible
from evret_core.results.trace_results import OUTCOMES, TraceResults
from evret_core.statistics.inference import format_interval

__all__ = ["Table", "TraceReportData", "render_terminal", "trace_tables"]


@dataclass
class TraceReportData:
    """The agent-trace runs of a report (name -> results), in order; rendered by
    :func:`evret_core.report.render.render_report` as the other kinds are."""

    runs: dict[str, TraceResults]
    warnings: list[str] = field(default_factory=list)  # what a renderer had to leave out (evret report prints them)

    @property
    def names(self) -> list[str]:
        return list(self.runs)


@dataclass
class Table:
    """One table: a title, its header and rows of text cells, and a note under it."""

    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    numeric: list[bool] = field(default_factory=list)


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def trace_tables(results: TraceResults) -> list[Table]:
    """The tables of ``results``, in the order they are printed."""
    metrics = list(results.metrics)
    measured = len(results.queries)
    hop_rows = [["all hops", str(measured), *("-" if m not in results.scores else format_interval(
        results.scores[m], results.intervals.get(m)) for m in metrics)]]
    for number, cell in sorted(results.by_hop_index.items(), key=lambda kv: int(kv[0])):
        hop_rows.append([f"hop {number}", str(cell["n"]),
                         *("-" if m not in cell["scores"] else format_interval(cell["scores"][m],
                                                                               cell["intervals"].get(m))
                           for m in metrics)])
    level = round(results.confidence_level * 100)
    tables = [Table(f"Retrieval per hop (k = {results.k})", ["hop", "n", *metrics], hop_rows,
                    f"hop n: the n-th retrieve hop of each trace, with {level}% bootstrap intervals over traces; "
                    f"all hops: the mean over every measured hop, its interval resampling traces with their hops "
                    f"(hops of one trace are not independent)")]
    total = sum(results.outcomes.values())
    tables.append(Table("Outcomes", ["outcome", "traces", "share"],
                        [[name, str(results.outcomes.get(name, 0)),
                          _number(results.outcomes.get(name, 0) / total if total else None)] for name in OUTCOMES]))
    if results.first_lost_hop:
        tables.append(Table("First lost hop", ["hop", "traces"],
                            [[f"hop {n}", str(c)] for n, c in sorted(results.first_lost_hop.items(),
                                                                     key=lambda kv: int(kv[0]))]))
    def measure(value: float | None, name: str) -> str:
        return "-" if value is None else format_interval(value, results.hop_intervals.get(name))

    tables.append(Table("Hops", ["measure", "traces", "value"], [
        ["hops per success (right traces)", str(results.outcomes.get("right", 0)),
         measure(results.hops_per_success, "hops_per_success")],
        ["hops per trace (all traces)", str(len(results.per_trace)), measure(results.hops_per_trace, "hops_per_trace")],
        ["hops to gold (first hop that found it)", str(sum(t.found_at_hop is not None
                                                            for t in results.per_trace.values())),
         measure(results.hops_to_gold, "hops_to_gold")]],
        f"means over traces with {level}% bootstrap intervals over traces"))
    slice_rows = []
    for tag, values in results.slices.items():
        for value, cell in values.items():
            slice_rows.append([visible(tag), visible(value), str(cell["n"]), str(cell["outcomes"].get("right", 0)),
                               *(_number(cell["scores"].get(m)) for m in metrics)])
    if slice_rows:
        tables.append(Table("Slices by tag", ["tag", "value", "traces", "right", *metrics], slice_rows))
    return tables


def render_terminal(results: TraceResults) -> str:
    """The tables as aligned plain text."""
    out: list[str] = []
    for table in trace_tables(results):
        widths = [max(len(row[i]) for row in [table.header, *table.rows]) for i in range(len(table.header))]
        out.append(table.title)
        out.append("  ".join(h.ljust(w) for h, w in zip(table.header, widths, strict=True)).rstrip())
        out.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table.rows)
        if table.note:
            out.append(f"({table.note})")
        out.append("")
    return "\n".join(out)
