"""Markdown report: metrics with intervals, slices and the comparison of runs, as GitHub-flavoured tables.

One Markdown writer for both kinds of runs: retrieval reports (:class:`ReportData`) and RAG reports
(:class:`RagReportData`, whose document of titled tables comes from :mod:`evret_core.report.rag_document`) use the
same table, heading and escaping rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evret_core.contracts.errors import visible
from evret_core.report.common import PPI_NOTE, RagReportData, ReportData, ppi_rows, slice_cell
from evret_core.statistics.inference import format_interval

if TYPE_CHECKING:
    from evret_core.report.rag_document import Section


# what Markdown would read as markup in a cell or a heading: table pipes, HTML tags and autolinks, the backslash
# that escapes them, and a closing bracket that opens a link or image target ("](", "][") or defines one ("]:"):
# with those escaped no link, image or reference can form, and "[0.1, 0.3]" stays as it is written
_MARKUP = str.maketrans({"\\": "\\\\", "|": "\\|", "<": "&lt;", ">": "&gt;"})
_TARGET = re.compile(r"\](?=[(\[:])")
_LINE_BREAK = re.compile(r"\r\n|[\r\n]")


def md_escape(text: str) -> str:
    """Text from data safe inside a Markdown table cell or heading: line breaks (and so blank lines) become spaces,
    control characters visible escapes (:func:`evret_core.contracts.errors.visible`), pipes, HTML brackets and backslashes
    literal text, and no link, image or link reference can form (the ``]`` before ``(``, ``[`` or ``:`` escaped)."""
    return _TARGET.sub(r"]\\", visible(_LINE_BREAK.sub(" ", str(text))).translate(_MARKUP))


def md_code(text: str) -> str:
    """Text from data as a code span (inside one nothing is markup but a backtick: text holding one is escaped
    instead, as a cell is)."""
    flat = visible(_LINE_BREAK.sub(" ", str(text)))
    return f"`{flat}`" if "`" not in flat and flat.strip() else md_escape(flat)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a GitHub-flavoured table (cells as given: escape them with :func:`md_escape` first)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines



def render_sections(title: str, sections: Sequence[Section]) -> str:
    """A document of titled tables (headings, notes, tables; every text escaped) under ``# title``."""
    lines = [f"# {title}", ""]
    for s in sections:
        lines += ["#" * s.level + " " + md_escape(s.title), ""]
        if s.note:
            lines += [md_escape(s.note), ""]
        if s.header:
            lines += md_table([md_escape(h) for h in s.header], [[md_escape(c) for c in row] for row in s.rows])
            lines.append("")
    return "\n".join(lines)


def render_markdown(data: ReportData | RagReportData) -> str:
    """The Markdown report of ``data``: retrieval runs, or RAG runs (the sections of
    :func:`evret_core.report.rag_document.rag_sections`)."""
    if isinstance(data, RagReportData):
        from evret_core.report.rag_document import rag_sections

        return render_sections("RAG evaluation", rag_sections(data.runs, data.comparison))
    lines: list[str] = ["# Evret report", ""]
    for name, results in data.runs.items():
        m = results.manifest
        dataset = (m.dataset.get("name") or "dataset") if m else "dataset"
        level = f", {results.confidence_level:.0%} bootstrap CI" if results.confidence_level else ""
        digest = str(m.dataset.get("hash") or "") if m else ""
        lines.append(f"- **{md_escape(name)}**: {md_escape(str(dataset))}, {results.num_queries} queries{level}"
                     + (f", dataset hash {md_code(digest[:12])}" if digest else ""))
    lines += ["", "## Metrics", ""]
    lines += md_table(["metric"] + [md_escape(n) for n in data.names],
                    [[md_escape(metric)] + [format_interval(r.scores[metric], r.intervals.get(metric))
                                            for r in data.runs.values()] for metric in data.metrics])
    ppi = ppi_rows(data, md_escape)
    if ppi:
        lines += ["", "## Intervals that include judge error", "", PPI_NOTE[0].upper() + PPI_NOTE[1:] + ".", ""]
        lines += md_table(["metric"] + [md_escape(n) for n in data.names],
                        [[md_escape(metric)] + cells for metric, cells in ppi])
    if data.comparison is not None:
        c = data.comparison
        lines += ["", "## Comparison", "",
                  f"{c.test} test, Holm-Bonferroni over {len(c.pairs)} comparisons, {len(c.query_ids)} queries; "
                  f"**bold** = significant (p_adjusted < {c.alpha:g}).", ""]
        rows = []
        for p in c.pairs:
            delta = f"{p.delta:+.4f}"
            rows.append([md_escape(p.metric), md_escape(f"{p.b} vs {p.a}"), f"**{delta}**" if p.significant else delta,
                         f"{p.p_value:.4g}", f"{p.p_adjusted:.4g}", f"{p.effect_size:+.2f}"])
        lines += md_table(["metric", "pair", "delta", "p", "p_adjusted", "effect size (d)"], rows)
        for warning in c.warnings:
            lines += ["", f"> WARNING: {md_escape(warning)}"]
    for name, results in data.runs.items():
        for tag, values in results.slices.items():
            lines += ["", f"## Slices of {md_escape(name)} by {md_escape(tag)}", ""]
            rows = [[md_escape(value) + (" (small)" if sl.small else ""), str(sl.n)]
                    + [slice_cell(sl, m) for m in data.metrics]
                    for value, sl in values.items()]
            lines += md_table(["value", "N"] + [md_escape(m) for m in data.metrics], rows)
    return "\n".join(lines) + "\n"
