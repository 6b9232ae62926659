"""The RAG report as a document of titled tables, written as Markdown or as one self-contained HTML page.

:func:`rag_sections` computes what the report says once (retrieval, generation per condition, failure
attribution, condition differences, slices, adversarial rates, the comparison of runs); :func:`render_markdown`
and :func:`render_html` only lay it out. Every text from a results file (run names, tags, tag values, condition
names) is escaped by the renderer: pipes and brackets in Markdown cells, HTML autoescaping in the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evret_core.rag.results import ATTRIBUTIONS, RagResults
from evret_core.stats import Comparison, format_interval

__all__ = ["Section", "rag_sections", "render_html", "render_markdown"]

GENERATION = ("exact", "f1", "correct", "refused", "wrong_refusal_rate", "correct_refusal_rate", "groundedness",
              "faithfulness", "citation_precision", "citation_recall", "answer_relevance")
SLICE_METRICS = ("exact", "f1", "correct", "refused")


@dataclass
class Section:
    """A heading (``level`` 2 or 3), an optional note and an optional table (header and rows of cell texts)."""

    level: int
    title: str
    note: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


def cell(value: Any, interval: Sequence[float] | None = None) -> str:
    """A score with its interval, or ``n/a`` when the run did not measure it."""
    return "n/a" if value is None else format_interval(float(value), interval)


def _run_sections(name: str, r: RagResults) -> list[Section]:
    level = f"{r.confidence_level:.0%} CI"
    out = [Section(2, name, f"{len(r.per_question)} questions; conditions: {', '.join(r.conditions)}.")]
    if r.retrieval:
        out.append(Section(3, f"Retrieval (retrieved condition, {level})", header=["metric", "value"],
                           rows=[[m, cell(v, r.retrieval_intervals.get(m))] for m, v in r.retrieval.items()]))
    rows = [[metric] + [cell(r.generation.get(c, {}).get(metric), r.generation_intervals.get(c, {}).get(metric))
                        for c in r.conditions]
            for metric in GENERATION if any(metric in r.generation.get(c, {}) for c in r.conditions)]
    out.append(Section(3, f"Generation ({level})", header=["metric", *r.conditions], rows=rows))
    if r.attribution:
        total = sum(r.attribution.values()) or 1
        out.append(Section(3, "Failure attribution", header=["outcome", "questions", "share"],
                           rows=[[label, str(r.attribution.get(label, 0)), f"{r.attribution.get(label, 0) / total:.1%}"]
                                 for label in ATTRIBUTIONS]))
    if r.differences:
        out.append(Section(3, "Differences between conditions (paired bootstrap)", header=["b - a", "metric", "mean", "n"],
                           rows=[[f"{d.b} - {d.a}", d.metric, cell(d.mean, d.interval), str(d.n)]
                                 for d in r.differences]))
    for tag, values in r.slices.items():
        out.append(Section(3, f"Slices by {tag}", header=["value", "condition", *SLICE_METRICS],
                           rows=[[value, condition] + [cell(scores.get(m)) for m in SLICE_METRICS]
                                 for value, by_condition in values.items()
                                 for condition, scores in by_condition.items()]))
    for condition, entry in r.adversarial.items():
        rows = [[rate, cell(v, entry["intervals"].get(rate))] for rate, v in entry["rates"].items()]
        drop = entry.get("drop") or {}
        if drop.get("n"):
            rows.append([f"correct vs {entry['clean']}", cell(drop["delta"], drop["interval"])])
        out.append(Section(3, f"Adversarial: {condition} ({entry['family']}, n={entry.get('n', 0)})",
                           header=["rate", "value"], rows=rows))
    return out


def rag_sections(runs: Mapping[str, RagResults], comparison: Comparison | None = None) -> list[Section]:
    """Everything the report of ``runs`` shows, in order (see the module)."""
    out: list[Section] = []
    for name, r in runs.items():
        out += _run_sections(name, r)
    if comparison is not None:
        out.append(Section(2, "Comparison", f"{comparison.test} test, Holm-Bonferroni over {len(comparison.pairs)} "
                           f"comparisons; * = adjusted p < {comparison.alpha:g}",
                           ["metric", "pair", "delta", "n", "p (adjusted)"],
                           [[p.metric, f"{p.b} vs {p.a}", f"{p.delta:+.4f}", str(p.n),
                             f"{p.p_adjusted:.3g}{' *' if p.significant else ''}"] for p in comparison.pairs]))
    return out


def render_markdown(sections: Sequence[Section]) -> str:
    """The sections as Markdown under ``# RAG evaluation`` (table cells escaped)."""
    from evret_core.report.markdown import md_escape

    lines = ["# RAG evaluation", ""]
    for s in sections:
        lines += ["#" * s.level + " " + md_escape(s.title), ""]
        if s.note:
            lines += [md_escape(s.note), ""]
        if s.header:
            lines += ["| " + " | ".join(map(md_escape, s.header)) + " |", "|---" * len(s.header) + "|"]
            lines += ["| " + " | ".join(map(md_escape, row)) + " |" for row in s.rows]
            lines.append("")
    return "\n".join(lines)


def render_html(sections: Sequence[Section], title: str = "RAG evaluation") -> str:
    """The sections as one HTML page that loads nothing (same style and content policy as ``evret report``)."""
    from evret_core.report.html import PALETTE, environment

    return environment().get_template("rag.html.j2").render(title=title, sections=list(sections), palette=PALETTE)
