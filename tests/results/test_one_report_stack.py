"""One report stack: RAG reports go through `render_report` and the renderers retrieval reports use (one Markdown
writer, one page template), so one format change applies to both; outputs are byte-identical to the committed
reports (tests/results/data/report-*, written from the committed results files), so that every change of a report's
format is deliberate and shows in their diff."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

import evret_core
from evret_core import EvretError
from evret_core.report import RagReportData, ReportData, render_report
from evret_core.report import markdown as markdown_module
from evret_core.report.html import environment
from evret_core.report.rag_compare import compare_rag, rag_html, rag_markdown
from evret_core.results.files import load_results
from evret_core.results.rag_results import RagResults

DATA = Path(__file__).parent / "data"
RAG, RETRIEVAL = DATA / "rag-v1.json", DATA / "retrieval-v2.json"


def _rag(name: str) -> RagResults:
    results = load_results(RAG)
    assert isinstance(results, RagResults)
    return results


def test_reports_are_byte_identical_to_the_committed_ones() -> None:
    x, y = _rag("x"), _rag("y")
    two = {"x": x, "y": y}
    assert rag_markdown(two, compare_rag(two)) == (DATA / "report-rag-two-runs.md").read_text(encoding="utf-8")
    assert rag_html({"x": x}) == (DATA / "report-rag-one-run.html").read_text(encoding="utf-8")
    retrieval = load_results(RETRIEVAL)
    assert evret_core.make_report({"a": retrieval, "b": load_results(RETRIEVAL)}, format="markdown") == (
        DATA / "report-retrieval-two-runs.md").read_text(encoding="utf-8")


def test_the_api_reports_and_compares_rag_runs_through_render_report(tmp_path: Path) -> None:
    data = evret_core.report_data({"x": str(RAG), "y": str(RAG)})
    assert isinstance(data, RagReportData) and data.comparison is not None
    assert data.comparison.metrics[0] == "retrieval/recall@1"
    expected = (DATA / "report-rag-two-runs.md").read_text(encoding="utf-8")
    assert evret_core.make_report(data, format="markdown") == render_report(data, "markdown") == expected
    one = evret_core.write_report(tmp_path / "rag.html", {"x": str(RAG)})
    assert one.read_text(encoding="utf-8") == (DATA / "report-rag-one-run.html").read_text(encoding="utf-8")
    comparison = evret_core.compare(str(RAG), str(RAG))
    assert {p.metric for p in comparison.pairs} >= {"gold/f1", "retrieved/correct", "retrieval/mrr@10"}
    with pytest.raises(EvretError, match="RAG runs are reported as markdown or html"):
        evret_core.make_report(str(RAG), format="latex")
    with pytest.raises(EvretError, match="compare RAG runs .* with RAG runs"):
        evret_core.make_report(str(RAG), str(RETRIEVAL), format="markdown")


def test_one_markdown_writer_for_both_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    real = markdown_module.md_table

    def marked(header: list[str], rows: list[list[str]]) -> list[str]:
        return ["<!-- table -->", *real(header, rows)]

    monkeypatch.setattr(markdown_module, "md_table", marked)
    rag = render_report(RagReportData({"x": _rag("x")}), "markdown")
    retrieval = evret_core.make_report({"a": load_results(RETRIEVAL)}, format="markdown")
    for text, tables in ((rag, 5), (retrieval, 2)):  # every table of either report, from the one writer
        assert text.count("<!-- table -->") == sum(line.startswith("|---") for line in text.splitlines()) == tables


def test_one_page_template_for_both_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    env = environment()
    page = (Path(evret_core.__file__).parent / "report" / "templates" / "page.html.j2").read_text(encoding="utf-8")
    changed = page.replace("<header><h1>Evret report</h1>", "<header><h1>Evret report</h1><p>one page</p>")
    assert changed != page
    monkeypatch.setattr(env, "loader", jinja2.ChoiceLoader([jinja2.DictLoader({"page.html.j2": changed}),
                                                           env.loader]))
    env.cache.clear()
    try:
        rag = render_report(RagReportData({"x": _rag("x")}), "html")
        data = evret_core.report_data({"a": load_results(RETRIEVAL)})
        assert isinstance(data, ReportData)
        retrieval = render_report(data, "html")
    finally:
        env.cache.clear()
    for page_text in (rag, retrieval):
        assert page_text.count("<p>one page</p>") == 1
        assert page_text.startswith("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
    # each page adds what its script and charts need to the one content policy
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">" in rag
    assert "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">" \
        in retrieval
