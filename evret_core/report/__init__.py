"""Stage 8, report: reports of retrieval and RAG results: terminal tables, Markdown, HTML (one self-contained file)
and LaTeX; experiment tracking (MLflow)."""

from evret_core.report.common import RagReportData, ReportData, build_report_data
from evret_core.report.render import FORMATS, RAG_FORMATS, render_report

__all__ = ["FORMATS", "RAG_FORMATS", "RagReportData", "ReportData", "build_report_data", "render_report"]
