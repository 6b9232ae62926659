"""One renderer per report format: :func:`render_report` turns the data of retrieval, RAG or agent-trace runs into
a Markdown, HTML or LaTeX report (the renderers are imported when a format is asked for)."""

from __future__ import annotations

from evret_core.contracts.errors import EvretError
from evret_core.report.common import RagReportData, ReportData
from evret_core.report.trace_tables import TraceReportData

FORMATS = ("markdown", "html", "latex")
RAG_FORMATS = ("markdown", "html")


def render_report(data: ReportData | RagReportData | TraceReportData, fmt: str) -> str:
    """The report of ``data`` as text in ``fmt``: ``markdown``, ``html`` or ``latex`` (retrieval runs); RAG runs
    (:class:`RagReportData`) go through the same renderers, as ``markdown`` or ``html``; agent-trace runs
    (:class:`TraceReportData`) as ``markdown`` or ``html`` too."""
    if isinstance(data, TraceReportData):
        from evret_core.report.trace_document import render_trace_report

        return render_trace_report(data, fmt)
    if fmt == "markdown":
        from evret_core.report.markdown import render_markdown

        return render_markdown(data)
    if fmt == "html":
        from evret_core.report.html import render_html

        return render_html(data)
    if fmt == "latex":
        from evret_core.report.latex import render_latex

        if isinstance(data, RagReportData):
            raise EvretError(f"format {fmt!r}: RAG runs are reported as {' or '.join(RAG_FORMATS)} (the results "
                             f"JSON holds everything else)")
        return render_latex(data)
    raise EvretError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")

