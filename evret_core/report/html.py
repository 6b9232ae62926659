"""HTML report: one self-contained file that works offline (inline CSS, JS and SVG; nothing is fetched).

The page is rendered from the Jinja2 templates in ``evret_core/report/templates`` with autoescaping on, so every
piece of text from the results is escaped where it lands (element text or attribute). This module only computes
what the templates show (numbers, chart geometry); it writes no markup. Sections (element ids): ``metrics`` (means
with intervals), ``curves`` (metric@k for k = 1..K per run), ``slices`` (per-tag bars with intervals),
``comparison`` (paired tests), ``queries`` (per-query drill-down: one JSON block, see
:mod:`evret_core.report.drilldown`, drawn by the page's script) and ``manifest``.

The page stays within ``PAGE_BUDGET`` (5 MB) whatever the data: the rest of the page is rendered first, each run's
manifest cut to ``MANIFEST_CHARS``, and the drill-down gets what is left (see the drill-down's degradation steps).
What was cut is said on the page and added to ``ReportData.warnings`` (``evret report`` prints them on stderr).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

import jinja2
from markupsafe import Markup, escape

from evret_core.report.common import PPI_NOTE, RagReportData, ReportData, clean_text, ppi_rows
from evret_core.report.drilldown import PAGE_BUDGET, drilldown_data, script_json, text_cap, truncation_notes
from evret_core.statistics.inference import format_interval

SECTIONS = ("metrics", "curves", "slices", "comparison", "queries", "manifest")
MANIFEST_CHARS = 100_000  # per run; a results file can carry any config
# Slices: a tag per query (an id as a tag) would draw a bar per query per metric per run.
MAX_SLICE_TAGS = 20
MAX_SLICE_BLOCKS = 60  # (tag, metric) blocks
MAX_SLICE_VALUES = 50  # the largest values of a tag (by queries), fewer when many blocks and runs share the page
MAX_SLICE_BARS = 6000
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f")
# a dash pattern per run (with its colour) in the metric@k charts, so that a run drawn over another stays visible
DASHES = ("", "7 4", "2 3", "9 3 2 3", "4 2", "1 3", "12 4", "5 2 1 2")
OVERLAP = 0.005  # two curves closer than this share of the y axis at every k are drawn as one line


def _finalize(value: object) -> object:
    """Every ``{{ value }}`` of the templates: strings lose lone surrogates (then autoescaping applies)."""
    return clean_text(value) if isinstance(value, str) and not isinstance(value, Markup) else value


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The templates' environment: HTML autoescaping everywhere, undefined names are errors."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("evret_core.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, finalize=_finalize,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )


def _nice_max(values: list[float]) -> float:
    top = max((v for v in values if math.isfinite(v)), default=1.0)
    return 1.0 if top <= 1.0 else math.ceil(top * 10) / 10


def curve_chart(family: str, curves: dict[str, tuple[int, list[float]]], width: int = 520,
                height: int = 300) -> dict[str, Any]:
    """Geometry of a line chart of ``family@k`` against k: one line per run (run -> (colour index, values)), each
    with its run's colour and dash pattern; a run whose curve coincides with an earlier one's (within ``OVERLAP``
    of the axis) is drawn over it, narrower, and ``overlaps`` says so."""
    left, right, top, bottom = 46, 12, 26, 36
    depth = max((len(v) for _, v in curves.values()), default=1)
    ymax = _nice_max([x for _, v in curves.values() for x in v])
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(k: int) -> float:
        return round(left + (plot_w * (k - 1) / (depth - 1) if depth > 1 else plot_w / 2), 1)

    def py(y: float) -> float:
        return round(top + plot_h * (1 - y / ymax), 1)

    grid = [{"y": py(ymax * i / 5), "label": f"{ymax * i / 5:.1f}"} for i in range(6)]
    ticks = sorted({1, depth, *range(0, depth + 1, max(1, depth // 8 or 1))} - {0})
    runs = list(curves.items())

    def same(a: list[float], b: list[float]) -> bool:
        return len(a) == len(b) and all(abs(x - y) <= OVERLAP * ymax for x, y in zip(a, b, strict=True))

    # a line that later lines are drawn over is wider (and its dots larger), so it shows on both sides of them
    under = [sum(1 for _, (_, later) in runs[i + 1:] if same(values, later)) for i, (_, (_, values)) in enumerate(runs)]
    overlaps = []
    for i, (run, (_, values)) in enumerate(runs):
        below = next((name for name, (_, earlier) in runs[:i] if same(values, earlier)), None)
        if below is not None:
            overlaps.append(f"{run} draws over {below} (the same values)")
    lines = [{"run": run, "color": color, "dash": DASHES[color % len(DASHES)],
              "width": f"{2 + 1.5 * min(under[i], 3):g}", "radius": f"{2.5 + 1.5 * min(under[i], 3):g}",
              "points": " ".join(f"{px(k)},{py(v)}" for k, v in enumerate(values, start=1)),
              "dots": [{"x": px(k), "y": py(v), "k": k, "value": f"{v:.4f}"} for k, v in enumerate(values, start=1)]
              if len(values) <= 30 else []}
             for i, (run, (color, values)) in enumerate(runs)]
    return {"family": family, "width": width, "height": height, "left": left, "right": width - right,
            "axis_y": height - bottom + 16, "mid_x": round(left + plot_w / 2, 1), "grid": grid,
            "ticks": [{"x": px(k), "label": k} for k in ticks], "lines": lines, "overlaps": overlaps}


def _curves(data: ReportData) -> list[dict[str, Any]]:
    families: list[str] = []
    for curves in data.curves.values():
        families += [f for f in curves if f not in families]
    return [curve_chart(f, {n: (i, data.curves[n][f]) for i, n in enumerate(data.names) if f in data.curves[n]})
            for f in families]


def _pct(value: float, top: float) -> float:
    return round(max(0.0, min(100.0, 100.0 * value / top)), 2) if math.isfinite(value) else 0.0


def _bar(run: str, color: int, value: float, ci: list[float] | None, n: int, small: bool,
         top: float) -> dict[str, Any]:
    bar = {"run": run, "color": color, "value": value, "ci": ci, "n": n, "small": small,
           "text": format_interval(value, ci), "width": _pct(value, top)}
    if ci:
        bar["lo"] = lo = _pct(ci[0], top)
        bar["span"] = round(max(0.0, _pct(ci[1], top) - lo), 2)
    return bar


def _slices(data: ReportData, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """One block per (tag, metric): a group per tag value with one bar per run. Bounded (``MAX_SLICE_*``): what is
    left out is said in ``notes``."""
    runs = list(data.runs.values())
    tags: list[str] = []
    for r in runs:
        tags += [t for t in r.slices if t not in tags]
    notes = [] if notes is None else notes
    if len(tags) > MAX_SLICE_TAGS:
        notes.append(f"the slices show the first {MAX_SLICE_TAGS} of {len(tags)} tags")
        tags = tags[:MAX_SLICE_TAGS]
    pairs = [(t, m) for t in tags for m in data.metrics]
    if len(pairs) > MAX_SLICE_BLOCKS:
        notes.append(f"the slices show the first {MAX_SLICE_BLOCKS} of {len(pairs)} tag and metric pairs")
        pairs = pairs[:MAX_SLICE_BLOCKS]
    per_tag = max(3, min(MAX_SLICE_VALUES, MAX_SLICE_BARS // max(1, len(pairs) * len(runs))))
    blocks = []
    for tag in dict.fromkeys(t for t, _ in pairs):
        values: list[str] = []
        for r in runs:
            values += [v for v in r.slices.get(tag, {}) if v not in values]
        if len(values) > per_tag:
            size = {v: max((r.slices.get(tag, {})[v].n for r in runs if v in r.slices.get(tag, {})), default=0)
                    for v in values}
            kept = set(sorted(values, key=lambda v: -size[v])[:per_tag])
            notes.append(f"the slices of tag {tag!r} show its {per_tag} largest of {len(values)} values")
            values = [v for v in values if v in kept]
        for metric in [m for t, m in pairs if t == tag]:
            found = [(value, [(i, sl) for i, r in enumerate(runs)
                              if (sl := r.slices.get(tag, {}).get(value)) is not None and metric in sl.scores])
                     for value in values]
            top = _nice_max([x for _, bars in found for _, sl in bars
                             for x in (sl.scores[metric], *(sl.intervals.get(metric) or []))])
            groups = [{"label": value, "small": any(sl.small for _, sl in bars),
                       "bars": [_bar(data.names[i], i, sl.scores[metric], sl.intervals.get(metric), sl.n, sl.small,
                                     top) for i, sl in bars]}
                      for value, bars in found if bars]
            blocks.append({"tag": tag, "metric": metric, "groups": groups,
                           "scale": [{"at": 25.0 * i, "label": f"{top * i / 4:.2f}"} for i in range(5)],
                           "small": [g["label"] for g in groups if g["small"]]})
    return blocks


def _comparison(data: ReportData) -> dict[str, Any] | None:
    c = data.comparison
    if c is None:
        return None
    rows = [{"metric": p.metric, "pair": f"{p.b} vs {p.a}", "delta": f"{p.delta:+.4f}", "negative": p.delta < 0,
             "significant": p.significant, "p": f"{p.p_value:.4g}", "p_adjusted": f"{p.p_adjusted:.4g}",
             "d": f"{p.effect_size:+.2f}",
             "gained": [{"id": g["query_id"], "delta": f"{g['delta']:+.3f}"} for g in p.gained[:3]],
             "lost": [{"id": g["query_id"], "delta": f"{g['delta']:+.3f}"} for g in p.lost[:3]]} for p in c.pairs]
    return {"test": c.test, "n": len(c.query_ids), "pairs": len(c.pairs), "alpha": f"{c.alpha:g}",
            "warnings": c.warnings, "rows": rows}


def _title(data: ReportData) -> str:
    """The runs, then the dataset they were scored on (when it has a name) and its size."""
    first = next(iter(data.runs.values()))
    dataset = first.manifest.dataset.get("name") if first.manifest else None
    runs = f"{'run' if len(data.names) == 1 else 'runs'}: {', '.join(data.names)}"
    return f"{runs}; dataset: {dataset} ({first.num_queries} queries)" if dataset else \
        f"{runs}; {first.num_queries} queries"


def _manifest_json(value: dict[str, Any]) -> tuple[str, bool]:
    text = json.dumps(value, indent=2, default=str)
    if len(text) <= MANIFEST_CHARS:
        return text, False
    return text[:MANIFEST_CHARS] + f"\n... ({len(text) - MANIFEST_CHARS:,} more characters in the results file)", True


def render_html(data: ReportData | RagReportData, data_budget: int | None = None) -> str:
    """The whole report as one HTML document within ``PAGE_BUDGET`` bytes when the page without its drill-down
    fits (``data_budget`` overrides the drill-down's share); it loads nothing from anywhere (a CSP forbids it).
    What had to be cut is listed on the page and appended to ``data.warnings``. RAG runs: :func:`render_rag_html`."""
    if isinstance(data, RagReportData):
        return render_rag_html(data, data_budget)
    level = next((r.confidence_level for r in data.runs.values() if r.confidence_level), None)
    manifests, cut_manifests = [], []
    for name, r in data.runs.items():
        text, cut = _manifest_json(r.manifest.model_dump() if r.manifest else {"config": r.config})
        manifests.append({"run": name, "json": text})
        if cut:
            cut_manifests.append(name)
    notes = [f"the manifest of run {name!r} is cut to {MANIFEST_CHARS:,} characters" for name in cut_manifests]
    slices = _slices(data, notes)
    context = {
        "title": _title(data), "sections": SECTIONS, "names": data.names, "palette": PALETTE, "dashes": DASHES,
        "several": len(data.runs) > 1, "metrics": data.metrics,
        "interval_note": f"{level:.0%} percentile bootstrap intervals over queries" if level
        else "no intervals in these results",
        "metric_rows": [{"metric": m, "cells": [format_interval(r.scores[m], r.intervals.get(m))
                                                for r in data.runs.values()]} for m in data.metrics],
        "ppi_rows": [{"metric": m, "cells": cells} for m, cells in ppi_rows(data)], "ppi_note": PPI_NOTE,
        "curves": _curves(data), "slices": slices, "comparison": _comparison(data),
        "query_metric": data.metrics[0] if data.metrics else None, "num_queries": 0, "total_queries": 0,
        "text_cap": None, "notes": notes, "drilldown": Markup(""), "manifests": manifests,
    }
    template = environment().get_template("report.html.j2")
    if data_budget is None:  # what the page without its drill-down leaves, less room for the notes
        data_budget = PAGE_BUDGET - len(template.render(context).encode("utf-8")) - 4096
    drill = drilldown_data(data, budget=data_budget)
    notes += truncation_notes(drill)
    context.update(query_metric=drill["metric"], num_queries=len(drill["queries"]), total_queries=drill["total"],
                   text_cap=drill["cap"], drilldown=Markup(script_json(drill)))
    for note in notes:
        if note not in data.warnings:
            data.warnings.append(f"HTML report: {note}")
    return template.render(context)


def render_rag_html(data: RagReportData, budget: int | None = None) -> str:
    """The RAG report of ``data`` as one HTML page that loads nothing (the retrieval report's environment, style
    and content policy): the sections of :func:`~evret_core.report.rag_page.page_context` (a nav bar, charts of
    every score by condition with intervals, sortable tables, the compact differences table), then the question
    list (:func:`~evret_core.report.rag_document.question_drilldown`): one collapsed entry per question, readable
    without the script, which adds the search, the filters (attribution, verdict under a condition, slice) and the
    sorting. With the run's ``questions``, each question lists its contexts with a preview of each text and a link
    to the text, and the page ends with every distinct context text once (a SQuAD passage that six questions and
    four conditions share is stored once, not 24 times).

    The page stays within ``budget`` bytes (the retrieval report's ``PAGE_BUDGET``, 5 MB): the drill-down holds
    fewer questions when even its markup does not fit, the previews shrink (160, then 80 characters) or go when they
    do not fit beside the whole texts, and the texts get what the rest leaves, each cut to the longest common
    length that fits (``text_cap``, as the retrieval report cuts its texts). What was cut is said on the page and
    appended to ``data.warnings``."""
    from evret_core.report.rag_document import MAX_QUESTIONS, PREVIEW_CHARS, question_drilldown
    from evret_core.report.rag_page import page_context, question_index

    runs, questions, warnings = data.runs, data.questions, data.warnings
    context = page_context(runs, data.comparison)
    title = data.title or ", ".join(runs)
    budget = PAGE_BUDGET if budget is None else budget
    template = environment().get_template("rag.html.j2")
    drill = question_drilldown(runs, questions=questions) if runs else []
    total = len({qid for r in runs.values() for qid in r.per_question})
    notes: list[str] = []

    def stored(shown: list[dict[str, Any]]) -> list[str]:
        return list(dict.fromkeys(d["text"] for q in shown for d in q["texts"] if d["text"] is not None))

    def page(shown: list[dict[str, Any]], cap: int | None, preview: int) -> str:
        index = {t: n for n, t in enumerate(stored(shown), start=1)}
        ids: dict[int, list[str]] = {}
        rows = []
        for q in shown:
            texts = []
            for d in q["texts"]:
                ref = index.get(d["text"]) if d["text"] is not None else None
                if ref is not None and d["id"] not in ids.setdefault(ref, []):
                    ids[ref].append(d["id"])
                texts.append({**d, "ref": ref, "text": _cut(d["text"], preview) if preview else ""})
            rows.append({**q, "texts": texts})
        store = [{"n": n, "ids": ", ".join(ids.get(n, [])), "text": _cut(t, cap)} for t, n in index.items()]
        qi = question_index(runs, shown)
        return template.render(**context, title=title, palette=PALETTE, names=list(runs), several=len(runs) > 1,
                               questions=rows, total_questions=total, notes=notes, with_texts=questions is not None,
                               store=store, qi=qi, index=Markup(script_json(qi["data"])))

    margin = 4096  # the notes
    size = len(page(drill, 0, 0).encode("utf-8"))
    while drill and size > budget - margin:  # the markup alone is too big: fewer questions
        drill = drill[: max(0, min(len(drill) - 1, int(len(drill) * (budget - margin) / size * 0.95)))]
        size = len(page(drill, 0, 0).encode("utf-8"))
    texts = stored(drill)

    def estimate(preview: int) -> int:
        """The page's size with whole texts and ``preview``-character previews, from the size without either
        (a render takes seconds at real sizes; this takes milliseconds and is exact but for the ellipses)."""
        def size_of(text: str | None) -> int:
            return len(str(escape(clean_text(text or ""))).encode("utf-8"))

        previews = sum(size_of(_cut(d["text"], preview)) + len("<small></small> ")
                       for q in drill for d in q["texts"] if d["text"])
        return size + previews + sum(size_of(t) for t in texts)

    html = ""
    for preview in (PREVIEW_CHARS, PREVIEW_CHARS // 2):  # whole texts, with the longest previews that fit
        if estimate(preview) > (budget - margin) * 1.01:
            continue  # clearly too large: not worth rendering
        html = page(drill, None, preview)
        if len(html.encode("utf-8")) <= budget - margin:
            break
    if not html or len(html.encode("utf-8")) > budget - margin:
        with_previews = len(page(drill, 0, preview).encode("utf-8"))
        if with_previews - size > (budget - margin - size) // 2:  # the previews would take half the texts' room
            preview = 0
        else:
            size = with_previews
        room = budget - margin - size
        cap = text_cap(texts, room)
        html = page(drill, cap, preview)
        for _ in range(8):  # escaping (&lt; for <) makes a text longer in the page than in the file: cut again
            over = len(html.encode("utf-8")) - (budget - margin)
            if over <= 0:
                break
            room -= over + 1024
            cap = text_cap(texts, max(0, room))
            html = page(drill, cap, preview)
    else:
        cap = None
    if runs and len(drill) < min(total, MAX_QUESTIONS):
        notes.append(f"the drill-down holds the first {len(drill)} of {total} questions: the others do not fit the "
                     f"report's {budget / 1e6:g} MB budget (the results file holds them all)")
    if questions is not None and not preview:
        notes.append(f"the drill-down links each context to its text without a preview, to fit the report's "
                     f"{budget / 1e6:g} MB budget")
    if cap is not None:
        notes.append(f"{sum(1 for t in texts if len(t) > cap)} of {len(texts)} distinct context texts are cut to "
                     f"{cap} characters to fit the report's {budget / 1e6:g} MB budget")
    if notes:
        html = page(drill, cap, preview)
        warnings += [f"HTML report: {n}" for n in notes]
    return html


def _cut(text: str | None, cap: int | None) -> str | None:
    return text if text is None or cap is None or len(text) <= cap else text[:cap] + "\u2026"
