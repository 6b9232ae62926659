"""A pipeline's report: :func:`pipeline_sections` turns a pipeline's JSON data
(:meth:`~evret_core.evaluation.stages.PipelineResults.to_dict`) into titled tables of cell texts once, and the
terminal (:func:`print_pipeline`), Markdown and HTML (:func:`render_pipeline`) lay out those same texts, so every
format shows each quantity as the same number. Text from data (stage names, query ids) is escaped by each layout."""

from __future__ import annotations

import html
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from evret_core.contracts.errors import EvretError, visible
from evret_core.report.markdown import render_sections
from evret_core.report.rag_document import Section
from evret_core.report.terminal import format_p, text_table
from evret_core.statistics.inference import format_interval

__all__ = ["pipeline_sections", "print_pipeline", "render_pipeline"]


def _delta(value: float, interval: Sequence[float]) -> str:
    return f"{value:+.3f} [{interval[0]:+.3f}, {interval[1]:+.3f}]"


def _moved(rows: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{row['query_id']} {row['before']:.3f}->{row['after']:.3f}" for row in rows) or "none"


def pipeline_sections(data: Mapping[str, Any]) -> list[Section]:
    """What every format of a pipeline's report shows, as cell texts: the stages' scores with intervals, what each
    stage added over each stage it reads (paired interval, p, Holm-adjusted p, effect size), the queries each stage
    helped and hurt most, packing, and judging."""
    settings = data["settings"]
    metrics = list(settings["metrics"])
    level = f"{settings['confidence_level']:.0%}"
    sections = [Section(2, "Stages", f"{settings['num_queries']} queries; each stage's mean with its {level} "
                                     f"bootstrap interval",
                        ["stage", "kind", "reads", *metrics],
                        [[s["name"], s["kind"], ", ".join(s["inputs"]) or "-",
                          *(format_interval(s["scores"][m], s["intervals"].get(m)) for m in metrics)]
                         for s in data["stages"]])]
    comparisons = data["comparisons"]
    if comparisons:
        sections.append(Section(
            2, "What each stage added",
            f"delta = stage - the stage it reads, with the paired {level} bootstrap interval of the mean difference; "
            f"{settings['test']} test, Holm-Bonferroni over {len(comparisons)} comparisons; significant: "
            f"p (Holm) < {settings['alpha']:g}",
            ["stage", "over", "metric", "before", "after", "delta [interval]", "p", "p (Holm)", "d", "significant"],
            [[c["stage"], c["over"], c["metric"], f"{c['before']:.3f}", f"{c['after']:.3f}",
              _delta(c["delta"], c["interval"]), format_p(c["p_value"]), format_p(c["p_adjusted"]),
              "n/a" if c["effect_size"] is None else f"{c['effect_size']:+.2f}",
              "yes" if c["significant"] else "no"] for c in comparisons]))
        sections.append(Section(
            3, "Queries helped and hurt most",
            f"the {settings['top']} queries whose score rose (helped) or fell (hurt) most: query before->after",
            ["stage", "over", "metric", "helped", "hurt"],
            [[c["stage"], c["over"], c["metric"], _moved(c["helped"]), _moved(c["hurt"])] for c in comparisons]))
    if data["packing"]:
        rows = []
        for name, p in data["packing"].items():
            recall = "; ".join(
                f"{m} {r['input']:.3f}->{r['packed']:.3f} ("
                + ("n/a" if r["survives"] is None else f"{r['survives']:.1%}") + " survives)"
                for m, r in p["recall"].items()) or "no recall metric asked"
            rows.append([name, p["input"], f"{p['budget']} ({p['tokenizer']})", f"{p['kept']:.2f} of {p['offered']:.2f}",
                         recall])
        sections.append(Section(2, "Packing", "documents kept of those offered (mean a query); the recall that "
                                              "survives the budget: the packed list's recall / its input's",
                                ["stage", "input", "budget (tokenizer)", "documents kept", "recall"], rows))
    judging = data["judging"]
    judge = judging["judge"] or "none (every query labelled by ids)"
    sections.append(Section(2, "Judging", f"judge {judge}: {judging['distinct_contexts']} distinct judgment "
                                          f"contexts judged once for {len(data['stages'])} stages (the stages' "
                                          f"plans held {judging['planned_by_stages']})"))
    return sections


def print_pipeline(data: Mapping[str, Any], title: str | None = None, file: TextIO | None = None) -> None:
    """The pipeline's report on the terminal (the texts of :func:`pipeline_sections`)."""
    out = file or sys.stdout
    if title:
        print(visible(title), file=out)
    for i, section in enumerate(pipeline_sections(data)):
        if i:
            print(file=out)
        print(f"{visible(section.title)}: {visible(section.note)}" if section.note else visible(section.title),
              file=out)
        if section.header:
            for line in text_table(section.rows, section.header):
                print(line, file=out)


_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:.5em 0 "
          "1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}th{background:#f3f3f3}"
          "p.note{color:#555}")


def render_pipeline(data: Mapping[str, Any], format: str = "html", title: str = "Pipeline evaluation") -> str:
    """The pipeline's report as ``markdown`` or ``html`` (one self-contained page, no script), from the texts of
    :func:`pipeline_sections`."""
    if format not in ("markdown", "html"):
        raise EvretError(f"a pipeline report is markdown or html, not {format!r}")
    sections = pipeline_sections(data)
    if format == "markdown":
        return render_sections(title, sections)
    e = html.escape
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
             f"<title>{e(title)}</title><style>{_STYLE}</style></head><body>", f"<h1>{e(title)}</h1>"]
    for section in sections:
        parts.append(f"<h{section.level}>{e(section.title)}</h{section.level}>")
        if section.note:
            parts.append(f'<p class="note">{e(section.note)}</p>')
        if section.header:
            parts.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in section.header)
                         + "</tr></thead><tbody>")
            parts += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in section.rows]
            parts.append("</tbody></table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
