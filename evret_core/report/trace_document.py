"""The report of agent-trace results (``evret report`` on ``evret trace`` files), as Markdown or as one HTML page
that loads nothing: the tables of :mod:`evret_core.report.trace_tables` per run, then each trace's outcome."""

from __future__ import annotations

import html

from evret_core.contracts.errors import EvretError
from evret_core.report.markdown import md_escape
from evret_core.report.trace_tables import Table, TraceReportData, trace_tables
from evret_core.results.trace_results import TraceResults

__all__ = ["TRACE_FORMATS", "render_trace_report"]

TRACE_FORMATS = ("markdown", "html")
MAX_TRACE_ROWS = 500
"""Traces listed per run in a report (the results JSON holds every one)."""


def _trace_table(results: TraceResults, name: str, warnings: list[str]) -> Table:
    rows = []
    for tid, trace in list(results.per_trace.items())[:MAX_TRACE_ROWS]:
        hops = " / ".join(("x" if h.found else "-" if h.found is False else "?") for h in trace.hops
                          if h.kind == "retrieve")
        rows.append([tid, trace.outcome, "-" if trace.found_at_hop is None else str(trace.found_at_hop),
                     "-" if trace.first_lost_hop is None else str(trace.first_lost_hop), hops or "(none)"])
    if len(results.per_trace) > MAX_TRACE_ROWS:
        warnings.append(f"run {name!r}: the report lists the first {MAX_TRACE_ROWS} of {len(results.per_trace)} "
                        f"traces (the results JSON holds every one)")
    return Table("Traces", ["trace", "outcome", "found at hop", "first lost hop", "hops (x found, - not, ? unmeasured)"],
                 rows)


def _markdown(data: TraceReportData) -> str:
    lines = ["# Evret agent-trace report", ""]
    for name, results in data.runs.items():
        lines += [f"## {md_escape(name)}", "",
                  f"{len(results.per_trace)} traces, {len(results.queries)} measured retrieve hops, k = {results.k}",
                  ""]
        for table in [*trace_tables(results), _trace_table(results, name, data.warnings)]:
            lines += [f"### {md_escape(table.title)}", "", "| " + " | ".join(map(md_escape, table.header)) + " |",
                      "|" + "---|" * len(table.header)]
            lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in table.rows]
            if table.note:
                lines += ["", md_escape(table.note)]
            lines.append("")
    return "\n".join(lines)


_STYLE = ("body{font-family:system-ui,sans-serif;margin:2rem;max-width:70rem}table{border-collapse:collapse;"
          "margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:left}"
          "th{background:#f3f3f3}p.note{color:#555;font-size:.9rem}")


def _html(data: TraceReportData) -> str:
    esc = html.escape
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
             "<title>Evret agent-trace report</title>", f"<style>{_STYLE}</style></head><body>",
             "<h1>Evret agent-trace report</h1>"]
    for name, results in data.runs.items():
        parts.append(f"<h2>{esc(name)}</h2><p>{len(results.per_trace)} traces, {len(results.queries)} measured "
                     f"retrieve hops, k = {results.k}</p>")
        for table in [*trace_tables(results), _trace_table(results, name, data.warnings)]:
            parts.append(f"<h3>{esc(table.title)}</h3><table><thead><tr>"
                         + "".join(f"<th>{esc(h)}</th>" for h in table.header) + "</tr></thead><tbody>")
            parts.extend("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in table.rows)
            parts.append("</tbody></table>")
            if table.note:
                parts.append(f"<p class=\"note\">{esc(table.note)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_trace_report(data: TraceReportData, fmt: str) -> str:
    """The report of ``data`` in ``fmt`` (``markdown`` or ``html``)."""
    if fmt == "markdown":
        return _markdown(data)
    if fmt == "html":
        return _html(data)
    raise EvretError(f"format {fmt!r}: trace runs are reported as {' or '.join(TRACE_FORMATS)} (the results JSON "
                     f"holds everything else)")
