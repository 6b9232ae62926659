"""HTML report: one self-contained file that works offline (inline CSS, JS and SVG; nothing is fetched).

Sections (element ids): ``metrics`` (means with intervals), ``curves`` (metric@k for k = 1..K per run),
``slices`` (per-tag bars with intervals), ``comparison`` (paired tests), ``queries`` (per-query drill-down with the
retrieved texts and every judgment) and ``manifest``. Every piece of text from the results is HTML-escaped.
"""

from __future__ import annotations

import json
import math
from html import escape

from evret_core.report.common import ReportData
from evret_core.results import QueryResult
from evret_core.stats import format_interval

SECTIONS = ("metrics", "curves", "slices", "comparison", "queries", "manifest")
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#be185d", "#4d7c0f")
MAX_DOCS_PER_QUERY = 20
MAX_TEXT_CHARS = 600


def e(value: object) -> str:
    """HTML-escaped text (quotes too, so it is safe inside attributes)."""
    return escape(str(value), quote=True)


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


_CSS = """
:root{--fg:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f9fafb;--good:#15803d;--bad:#b91c1c}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;background:var(--bg)}
header{background:#111827;color:#f9fafb;padding:18px 32px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:#d1d5db}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:8px 32px;z-index:2}
nav a{margin-right:16px;color:#2563eb;text-decoration:none}
main{padding:8px 32px 48px;max-width:1200px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 20px;margin:16px 0}
h2{font-size:18px;margin:4px 0 12px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
td.nowrap{white-space:nowrap}
.sig{font-weight:700;color:var(--good)}
.sig.neg{color:var(--bad)}
.muted{color:var(--muted)}
.small{background:#fef3c7;color:#92400e;border-radius:4px;padding:0 5px;font-size:12px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{border:1px solid var(--line);border-radius:6px;padding:6px}
svg text{font:11px system-ui,sans-serif;fill:#374151}
details.q{border-bottom:1px solid var(--line);padding:4px 0}
details.q>summary{cursor:pointer}
.run{margin:6px 0 10px 14px}
ol.docs{margin:4px 0;padding-left:26px}
ol.docs li{margin:4px 0}
.rel{border-left:3px solid var(--good);padding-left:6px}
.nonrel{border-left:3px solid var(--line);padding-left:6px}
.doctext{white-space:pre-wrap;color:#374151;font-size:13px}
.tag{background:#e0e7ff;border-radius:4px;padding:0 5px;margin-right:4px;font-size:12px}
input[type=search]{padding:5px 8px;width:320px;border:1px solid #d1d5db;border-radius:5px}
pre{background:#f3f4f6;padding:8px;overflow:auto;font-size:12px}
"""

_JS = """
(function () {
  var box = document.getElementById('query-search');
  var count = document.getElementById('query-count');
  function filter() {
    var needle = box.value.toLowerCase();
    var shown = 0;
    var items = document.querySelectorAll('details.q');
    for (var i = 0; i < items.length; i++) {
      var hit = !needle || items[i].getAttribute('data-search').indexOf(needle) >= 0;
      items[i].style.display = hit ? '' : 'none';
      if (hit) { shown++; }
    }
    count.textContent = shown + ' of ' + items.length + ' queries';
  }
  if (box) { box.addEventListener('input', filter); filter(); }
  var pick = document.getElementById('slice-metric');
  function showSlices() {
    var charts = document.querySelectorAll('[data-slice-metric]');
    for (var i = 0; i < charts.length; i++) {
      charts[i].style.display = charts[i].getAttribute('data-slice-metric') === pick.value ? '' : 'none';
    }
  }
  if (pick) { pick.addEventListener('change', showSlices); showSlices(); }
  document.documentElement.setAttribute('data-ready', 'yes');
})();
"""


def _nice_max(values: list[float]) -> float:
    top = max(values, default=1.0)
    return 1.0 if top <= 1.0 else math.ceil(top * 10) / 10


def curve_svg(family: str, curves: dict[str, list[float]], width: int = 520, height: int = 300) -> str:
    """A line chart of ``family@k`` against k, one line per run."""
    left, right, top, bottom = 46, 12, 26, 36
    depth = max((len(v) for v in curves.values()), default=1)
    ymax = _nice_max([x for v in curves.values() for x in v])
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(k: int) -> float:
        return left + (plot_w * (k - 1) / (depth - 1) if depth > 1 else plot_w / 2)

    def py(y: float) -> float:
        return top + plot_h * (1 - y / ymax)

    parts = [f'<svg role="img" aria-label="{e(family)} at k" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
             f'<text x="{left}" y="16" font-weight="600">{e(family)}@k</text>']
    for i in range(6):
        y = ymax * i / 5
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#e5e7eb"/>')
        parts.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.1f}</text>')
    ticks = sorted({1, depth, *range(0, depth + 1, max(1, depth // 8 or 1))} - {0})
    for k in ticks:
        parts.append(f'<text x="{px(k):.1f}" y="{height - bottom + 16}" text-anchor="middle">{k}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" text-anchor="middle">k</text>')
    for i, (run, values) in enumerate(curves.items()):
        points = " ".join(f"{px(k):.1f},{py(v):.1f}" for k, v in enumerate(values, start=1))
        parts.append(f'<polyline fill="none" stroke="{_color(i)}" stroke-width="2" points="{points}">'
                     f'<title>{e(run)}</title></polyline>')
        if len(values) <= 30:
            for k, v in enumerate(values, start=1):
                parts.append(f'<circle cx="{px(k):.1f}" cy="{py(v):.1f}" r="2.5" fill="{_color(i)}">'
                             f'<title>{e(run)}: {e(family)}@{k} = {v:.4f}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)


def slice_svg(metric: str, rows: list[tuple[str, float, list[float] | None, int, bool, int]], width: int = 560) -> str:
    """Horizontal bars (one per tag value and run) with interval whiskers; small slices drawn hatched-pale."""
    label_w, right, row_h, top = 170, 60, 20, 8
    height = top + row_h * len(rows) + 24
    ymax = _nice_max([(r[2] or [0.0, 0.0])[1] for r in rows] + [r[1] for r in rows])
    plot_w = width - label_w - right

    def px(v: float) -> float:
        return label_w + plot_w * v / ymax

    parts = [f'<svg role="img" aria-label="slices by {e(metric)}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    for i in range(5):
        v = ymax * i / 4
        parts.append(f'<line x1="{px(v):.1f}" x2="{px(v):.1f}" y1="{top}" y2="{height - 20}" stroke="#e5e7eb"/>'
                     f'<text x="{px(v):.1f}" y="{height - 6}" text-anchor="middle">{v:.2f}</text>')
    for j, (label, value, ci, n, small, run_index) in enumerate(rows):
        y = top + j * row_h
        color = _color(run_index)
        opacity = "0.35" if small else "0.85"
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{e(label)} (N={n})</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{max(0.0, px(value) - label_w):.1f}" height="{row_h - 6}" '
                     f'fill="{color}" fill-opacity="{opacity}"><title>{e(label)}: {format_interval(value, ci)}, '
                     f'N={n}{" (small)" if small else ""}</title></rect>')
        if ci:
            cy = y + row_h / 2
            parts.append(f'<line x1="{px(ci[0]):.1f}" x2="{px(ci[1]):.1f}" y1="{cy:.1f}" y2="{cy:.1f}" '
                         f'stroke="#111827" stroke-width="1.5"/>')
        parts.append(f'<text x="{px(max(value, (ci or [0, 0])[1])) + 4:.1f}" y="{y + 14}">{value:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _legend(names: list[str]) -> str:
    return " ".join(f'<span><span class="swatch" style="background:{_color(i)}"></span>{e(n)}</span>'
                    for i, n in enumerate(names))


def _metrics_section(data: ReportData) -> str:
    level = next((r.confidence_level for r in data.runs.values() if r.confidence_level), None)
    note = f"{level:.0%} percentile bootstrap intervals over queries" if level else "no intervals in these results"
    head = "".join(f"<th>{e(n)}</th>" for n in data.names)
    rows = "".join(
        f"<tr><td>{e(m)}</td>" + "".join(
            f'<td class="num">{e(format_interval(r.scores[m], r.intervals.get(m)))}</td>' for r in data.runs.values()
        ) + "</tr>" for m in data.metrics)
    return (f'<section id="metrics"><h2>Metrics</h2><p class="muted">{e(note)}</p>'
            f"<table><thead><tr><th>metric</th>{head}</tr></thead><tbody>{rows}</tbody></table></section>")


def _curves_section(data: ReportData) -> str:
    families: list[str] = []
    for curves in data.curves.values():
        families += [f for f in curves if f not in families]
    charts = "".join(
        f'<div class="chart">{curve_svg(f, {n: data.curves[n][f] for n in data.names if f in data.curves[n]})}</div>'
        for f in families)
    if not charts:
        charts = '<p class="muted">No per-rank judgments in these results.</p>'
    return (f'<section id="curves"><h2>Metric@k</h2><p>{_legend(data.names)}</p>'
            f'<div class="charts">{charts}</div></section>')


def _slices_section(data: ReportData) -> str:
    tags: list[str] = []
    for r in data.runs.values():
        tags += [t for t in r.slices if t not in tags]
    if not tags:
        return ('<section id="slices"><h2>Slices</h2><p class="muted">The queries have no tags, so there are no '
                'slices.</p></section>')
    options = "".join(f'<option value="{e(m)}">{e(m)}</option>' for m in data.metrics)
    blocks = []
    for tag in tags:
        values: list[str] = []
        for r in data.runs.values():
            values += [v for v in r.slices.get(tag, {}) if v not in values]
        for metric in data.metrics:
            rows = []
            for value in values:
                for i, r in enumerate(data.runs.values()):
                    sl = r.slices.get(tag, {}).get(value)
                    if sl is not None and metric in sl.scores:
                        label = value if len(data.runs) == 1 else f"{value} · {data.names[i]}"
                        rows.append((label, sl.scores[metric], sl.intervals.get(metric), sl.n, sl.small, i))
            small = [v for v in values if any((r.slices.get(tag, {}).get(v) or _NOT).small for r in data.runs.values())]
            flag = (f'<p><span class="small">small</span> fewer queries than the minimum slice size: '
                    f'{e(", ".join(small))}</p>') if small else ""
            blocks.append(f'<div data-slice-metric="{e(metric)}"><h3>by {e(tag)}: {e(metric)}</h3>'
                          f'{slice_svg(metric, rows)}{flag}</div>')
    return (f'<section id="slices"><h2>Slices</h2><label>metric <select id="slice-metric">{options}</select>'
            f"</label> {_legend(data.names) if len(data.runs) > 1 else ''}{''.join(blocks)}</section>")


class _NotSlice:
    small = False


_NOT = _NotSlice()


def _comparison_section(data: ReportData) -> str:
    c = data.comparison
    if c is None:
        return ('<section id="comparison"><h2>Comparison</h2><p class="muted">One run: give several results files '
                'to compare them with paired tests.</p></section>')
    rows = []
    for p in c.pairs:
        cls = ' class="num sig' + (' neg"' if p.delta < 0 else '"') if p.significant else ' class="num"'
        gained = ", ".join(f"{g['query_id']} ({g['delta']:+.3f})" for g in p.gained[:3])
        lost = ", ".join(f"{g['query_id']} ({g['delta']:+.3f})" for g in p.lost[:3])
        rows.append(f"<tr><td>{e(p.metric)}</td><td class='nowrap'>{e(p.b)} vs {e(p.a)}</td><td{cls}>{p.delta:+.4f}</td>"
                    f'<td class="num">{p.p_value:.4g}</td><td class="num">{p.p_adjusted:.4g}</td>'
                    f'<td class="num">{p.effect_size:+.2f}</td><td>{e(gained)}</td><td>{e(lost)}</td></tr>')
    warnings = "".join(f"<p><strong>Warning:</strong> {e(w)}</p>" for w in c.warnings)
    return (f'<section id="comparison"><h2>Comparison</h2><p class="muted">Paired {e(c.test)} test over '
            f"{len(c.query_ids)} queries, Holm-Bonferroni adjusted over {len(c.pairs)} comparisons; bold: "
            f"p_adjusted &lt; {c.alpha:g}. Effect size: Cohen's d of the paired differences.</p>{warnings}"
            "<table><thead><tr><th>metric</th><th>pair</th><th>delta</th><th>p</th><th>p_adjusted</th><th>d</th>"
            f"<th>gained most</th><th>lost most</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>")


def _doc_item(q: QueryResult, j_index: int) -> str:
    j = q.judgments[j_index]
    gain = q.gains[j_index] if j_index < len(q.gains) else 0.0
    text = j.text or ""
    cut = len(text) > MAX_TEXT_CHARS
    shown = text[:MAX_TEXT_CHARS] + ("…" if cut else "")
    if q.labelled_by == "text":
        matched = "; ".join(f"#{m + 1} {q.expected_answers[m][:80]}" if m < len(q.expected_answers) else f"#{m + 1}"
                            for m in j.matched)
        verdict = f"matches {matched}" if j.matched else "matches no expected answer"
        if j.unmeasured:
            verdict += f"; unmeasured for answer(s) {', '.join(f'#{m + 1}' for m in j.unmeasured)}"
        if j.matched and gain == 0.0:
            verdict += " (repeat: that answer was already found)"
    else:
        verdict = f"relevant (grade {gain:g})" if gain > 0 else "not relevant"
    score = "" if j.score is None else f" · score {j.score:.4g}"
    return (f'<li class="{"rel" if gain > 0 else "nonrel"}"><strong>{e(j.doc_id)}</strong>'
            f'<span class="muted">{e(score)} · {e(verdict)}</span>'
            + (f'<div class="doctext">{e(shown)}</div>' if shown else "") + "</li>")


def _queries_section(data: ReportData) -> str:
    runs = list(data.runs.items())
    first = runs[0][1]
    metric = data.metrics[0] if data.metrics else None
    ids = list(first.per_query)
    for _, r in runs[1:]:
        ids += [q for q in r.per_query if q not in first.per_query]
    items = []
    for qid in ids:
        present = [(i, name, r.per_query[qid]) for i, (name, r) in enumerate(runs) if qid in r.per_query]
        q0 = present[0][2]
        values = " ".join(
            f'<span class="swatch" style="background:{_color(i)}"></span>{q.scores.get(metric, 0.0):.3f}'
            for i, _, q in present) if metric else ""
        tags = "".join(f'<span class="tag">{e(k)}={e(v)}</span>' for k, v in q0.tags.items())
        answers = "".join(f"<li>{e(a)}</li>" for a in q0.expected_answers)
        relevant = ", ".join(f"{k} ({v:g})" for k, v in q0.relevant_ids.items()) if q0.labelled_by == "ids" else ""
        expected = (f"<p><strong>Expected answers</strong></p><ol>{answers}</ol>" if answers
                    else f"<p><strong>Relevant ids:</strong> {e(relevant)}</p>")
        blocks = []
        for i, name, q in present:
            docs = "".join(_doc_item(q, k) for k in range(min(len(q.judgments), MAX_DOCS_PER_QUERY)))
            more = (f'<p class="muted">{len(q.judgments) - MAX_DOCS_PER_QUERY} more retrieved documents not shown</p>'
                    if len(q.judgments) > MAX_DOCS_PER_QUERY else "")
            scores = ", ".join(f"{m} {v:.3f}" for m, v in q.scores.items())
            blocks.append(f'<div class="run"><h3><span class="swatch" style="background:{_color(i)}"></span>'
                          f'{e(name)} <span class="muted">{e(scores)}</span></h3><ol class="docs">{docs}</ol>{more}</div>')
        search = e(f"{qid} {q0.query_text} {' '.join(q0.tags.values())}".lower())
        items.append(f'<details class="q" data-search="{search}"><summary>{values} <strong>{e(qid)}</strong> '
                     f"{e(q0.query_text)} {tags}</summary>{expected}{''.join(blocks)}</details>")
    label = f" (first number: {e(metric)})" if metric else ""
    return (f'<section id="queries"><h2>Queries</h2><p><input type="search" id="query-search" '
            f'placeholder="filter by id, text or tag"> <span id="query-count" class="muted"></span>'
            f'<span class="muted">{label}</span></p>{"".join(items)}</section>')


def _manifest_section(data: ReportData) -> str:
    blocks = []
    for name, r in data.runs.items():
        manifest = r.manifest.model_dump() if r.manifest else {"config": r.config}
        blocks.append(f"<details><summary>{e(name)}</summary><pre>{e(json.dumps(manifest, indent=2, default=str))}"
                      f"</pre></details>")
    return f'<section id="manifest"><h2>Manifest</h2>{"".join(blocks)}</section>'


def _title(data: ReportData) -> str:
    first = next(iter(data.runs.values()))
    dataset = (first.manifest.dataset.get("name") if first.manifest else None) or "dataset"
    return f"{dataset}: {', '.join(data.names)} ({first.num_queries} queries)"


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document; it loads nothing from anywhere (a CSP forbids it)."""
    nav = "".join(f'<a href="#{s}">{s.capitalize()}</a>' for s in SECTIONS)
    body = "".join([_metrics_section(data), _curves_section(data), _slices_section(data),
                    _comparison_section(data), _queries_section(data), _manifest_section(data)])
    title = _title(data)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Evret report: {e(title)}</title><style>{_CSS}</style></head><body>"
        f"<header><h1>Evret report</h1><p>{e(title)}</p></header><nav>{nav}</nav><main>{body}</main>"
        f"<script>{_JS}</script></body></html>\n"
    )
