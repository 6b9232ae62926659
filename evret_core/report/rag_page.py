"""What the RAG HTML page shows, computed once for the templates (``rag.html.j2``): the sections and their tables,
the geometry of the interval charts, and the question list's filter index. It writes no markup: every text is
escaped where the template puts it, and the filter index is JSON made safe for a ``<script>`` element
(:func:`~evret_core.report.drilldown.script_json`), read by the page's script as data, never as markup.

Sections (element ids, in the nav bar's order): ``overview`` (the runs, how ``correct`` was decided, what was
unmeasured), ``generation`` (a chart per score with a row per condition, then the table), ``retrieval``,
``attribution`` (counts linking to the questions they count), ``differences`` (one row per pair of conditions, a
column per metric), ``adversarial``, ``slices``, ``comparison`` (several runs), ``questions`` (filters, search,
sorting, one collapsed entry per question), ``texts`` (with a question set) and ``manifest``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.report.rag_document import (
    SLICE_METRICS,
    VERDICT_FILTERS,
    cell,
    columns,
    condition_differences,
)
from evret_core.report.rag_tables import (
    carried_pairs,
    clean_condition,
    correct_rule,
    generation_rows,
    notes,
    turn_index_labels,
    turn_index_rows,
    unlabelled_behaviours,
    unmeasured_lines,
)
from evret_core.results.rag_results import ATTRIBUTIONS, CARRIED_FAILURE, RagResults
from evret_core.statistics.inference import Comparison, format_interval

ATTRIBUTION_MEANINGS = {
    "both_right": "right with the gold context and with the retrieved one",
    "retrieval_failure": "right with gold, wrong with retrieved, and no gold document was retrieved",
    "context_noise": "right with gold, wrong with retrieved although a gold document was retrieved",
    "generator_failure": "wrong even with the gold context",
    "unmeasured": "an answer or a judgment is missing, or the question has no correctness label",
    CARRIED_FAILURE: "a turn of a conversation wrong with the system's own history, right with the dataset's, after "
                     "an earlier wrong turn",
}
CHARTS_FIRST = ("correct", "f1", "exact", "refused", "wrong_refusal_rate", "correct_refusal_rate")
MARKERS = ("circle", "square", "diamond", "triangle")
LABEL_CHARS = 24  # a chart's row label longer than this is cut (the whole label is its tooltip)
MANIFEST_CHARS = 100_000  # per run, as the retrieval report


def _nice_max(values: Sequence[float]) -> float:
    top = max((v for v in values if math.isfinite(v)), default=1.0)
    return 1.0 if top <= 1.0 else math.ceil(top * 10) / 10


def _marker(shape: str, x: float, y: float) -> str:
    """An SVG path for the non-circle markers (a circle is drawn as a circle)."""
    if shape == "square":
        return f"M{x - 3.5:.1f} {y - 3.5:.1f}h7v7h-7z"
    if shape == "diamond":
        return f"M{x:.1f} {y - 4.5:.1f}l4.5 4.5l-4.5 4.5l-4.5-4.5z"
    return f"M{x:.1f} {y - 4.5:.1f}l4.5 8h-9z"


def interval_chart(title: str, labels: Sequence[str],
                   series: Sequence[tuple[str, int, Sequence[tuple[float | None, Sequence[float] | None]]]],
                   width: int = 380) -> dict[str, Any]:
    """Geometry of a dot-and-whisker chart: a row per label and, in each row, a marker per series (run) at its
    value with a whisker over its interval and the value written at the right. ``series``: (name, colour index,
    one (value or None, interval or None) per label); the x axis runs from 0 to 1, or further when a value
    does."""
    k = max(1, len(series))
    longest = max((len(label) for label in labels), default=4)
    left = round(min(LABEL_CHARS, longest) * 6.4 + 14)
    right, top, step = width - 50, 26, 13
    row_h = max(20, 7 + step * k)
    height = top + row_h * len(labels) + 22
    xmax = _nice_max([x for _, _, values in series for v, ci in values if v is not None
                      for x in (v, *(ci or ()))])

    def px(value: float) -> float:
        return round(left + (right - left) * max(0.0, min(value, xmax)) / xmax, 1)

    rows, points = [], []
    for i, label in enumerate(labels):
        y0 = top + i * row_h
        rows.append({"label": label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "\u2026",
                     "full": label, "y": round(y0 + row_h / 2 + 4, 1), "band": y0, "odd": i % 2 == 1})
        for j, (name, color, values) in enumerate(series):
            value, ci = values[i] if i < len(values) else (None, None)
            y = round(y0 + (row_h - step * (k - 1)) / 2 + j * step, 1)
            shape = MARKERS[color % len(MARKERS)]  # by run, as the legend
            point: dict[str, Any] = {"run": name, "color": color % 8, "y": y, "shape": shape, "value": value,
                                     "text": "n/a" if value is None else f"{value:.3f}",
                                     "tip": f"{title}, {label}: {cell(value, ci)}" + (f" ({name})" if k > 1 else "")}
            if value is not None:
                point["x"] = px(value)
                point["path"] = "" if shape == "circle" else _marker(shape, point["x"], y)
                if ci is not None and len(ci) == 2:
                    point["lo"], point["hi"] = px(ci[0]), px(ci[1])
            points.append(point)
    grid = [{"x": px(xmax * i / 4), "label": f"{xmax * i / 4:g}"} for i in range(5)]
    return {"title": title, "width": width, "height": height, "left": left, "right": right, "top": top,
            "bottom": top + row_h * len(labels), "row_h": row_h, "value_x": right + 6, "grid": grid, "rows": rows,
            "points": points, "several": len(series) > 1}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _cell(value: Any, interval: Sequence[float] | None = None, cls: str = "") -> dict[str, Any]:
    """A table cell: its text, the number a sort uses, and its class."""
    return {"text": cell(value, interval), "v": _num(value), "cls": cls}


def _conditions(runs: Mapping[str, RagResults]) -> list[str]:
    return list(dict.fromkeys(c for r in runs.values() for c in r.conditions))


def _generation(runs: Mapping[str, RagResults]) -> dict[str, Any]:
    conditions = _conditions(runs)
    metrics = list(dict.fromkeys(m for r in runs.values() for m in generation_rows(r)
                                 if any(r.generation.get(c, {}).get(m) is not None for c in r.conditions)))
    metrics = [m for m in CHARTS_FIRST if m in metrics] + [m for m in metrics if m not in CHARTS_FIRST]
    charts = [interval_chart(metric, conditions, [
        (name, i, [(r.generation.get(c, {}).get(metric), r.generation_intervals.get(c, {}).get(metric))
                   for c in conditions]) for i, (name, r) in enumerate(runs.items())], width=400) for metric in metrics]
    tables = []
    for name, r in runs.items():
        rows = [{"cells": [_cell_text(metric)] + [_cell(r.generation.get(c, {}).get(metric),
                                                        r.generation_intervals.get(c, {}).get(metric))
                                                  for c in r.conditions]}
                for metric in generation_rows(r) if any(metric in r.generation.get(c, {}) for c in r.conditions)]
        rows.append({"cells": [_cell_text("n (correct)")] + [
            {"text": str(r.generation_n.get(c, {}).get("correct", 0)), "v": r.generation_n.get(c, {}).get("correct"),
             "cls": ""} for c in r.conditions]})
        tables.append({"run": name, "header": ["metric", *r.conditions], "rows": rows})
    return {"charts": charts, "tables": tables}


def _cell_text(text: str, cls: str = "") -> dict[str, Any]:
    return {"text": text, "v": None, "cls": cls}


def _retrieval(runs: Mapping[str, RagResults]) -> dict[str, Any] | None:
    scored = {name: r for name, r in runs.items() if r.retrieval}
    if not scored:
        return None
    metrics = list(dict.fromkeys(m for r in scored.values() for m in r.retrieval))
    names = list(runs)
    chart = interval_chart("retrieval (retrieved condition)", metrics, [
        (name, names.index(name), [(r.retrieval.get(m), r.retrieval_intervals.get(m)) for m in metrics])
        for name, r in scored.items()], width=420)
    rows = [{"cells": [_cell_text(m)] + [_cell(r.retrieval.get(m), r.retrieval_intervals.get(m))
                                         for r in scored.values()]} for m in metrics]
    notes_ = []
    for name, r in scored.items():
        unlabelled = r.unmeasured.get("retrieval_unlabelled") or []
        if unlabelled:
            notes_.append(f"{name}: {len(r.per_question) - len(unlabelled)} of {len(r.per_question)} questions; the "
                          f"{len(unlabelled)} to {unlabelled_behaviours(r, unlabelled)} have no gold")
    level = next(iter(scored.values())).confidence_level
    return {"header": ["metric", *scored], "rows": rows, "chart": chart, "notes": notes_,
            "level": f"{level:.0%} CI"}


def attribution_key(run: str, label: str, several: bool) -> str:
    """The attribution filter's key for ``label`` of ``run`` (the run is named only when there are several)."""
    return f"{run}: {label}" if several else label


def _attribution(runs: Mapping[str, RagResults]) -> dict[str, Any] | None:
    counted = {name: r for name, r in runs.items() if r.attribution}
    if not counted:
        return None
    several = len(runs) > 1
    labels = list(ATTRIBUTIONS) + [x for r in counted.values() for x in r.attribution if x not in ATTRIBUTIONS]
    rows = []
    for label in labels:
        cells = []
        for name, r in counted.items():
            n, total = r.attribution.get(label, 0), sum(r.attribution.values()) or 1
            cells.append({"count": n, "share": f"{n / total:.1%}", "width": round(100 * n / total, 1),
                          "key": attribution_key(name, label, several)})
        rows.append({"label": label, "cells": cells, "meaning": ATTRIBUTION_MEANINGS.get(label, "")})
    by_turn = [{"run": name, "header": ["turn", *labels], "rows": turn_index_rows(r, labels)}
               for name, r in counted.items() if r.attribution_by_turn_index
               for labels in [turn_index_labels(r)]]
    carried = [{"run": name, "pairs": carried_pairs(r)} for name, r in counted.items() if carried_pairs(r)]
    return {"runs": list(counted), "rows": rows, "by_turn": by_turn, "carried": carried}


def _differences(runs: Mapping[str, RagResults]) -> list[dict[str, Any]]:
    out = []
    for name, r in runs.items():
        pairs = condition_differences(r)
        if not pairs:
            continue
        metrics = list(dict.fromkeys(m for p in pairs for m in p.cells))
        rows = []
        for p in pairs:
            cells = []
            for m in metrics:
                found = p.cells.get(m)
                if found is None:
                    cells.append(_cell(None))
                    continue
                mean, low, high = found
                sign = "pos" if low > 0 else "neg" if high < 0 else ""
                cells.append({"text": format_interval(mean, [low, high]), "v": mean, "cls": sign})
            rows.append({"label": p.label, "n": p.n_text, "clean": p.against_clean, "cells": cells})
        clean = clean_condition(r.conditions)
        out.append({"run": name, "clean": clean, "metrics": metrics, "rows": rows,
                    "level": f"{r.confidence_level:.0%}",
                    "first": sum(1 for p in pairs if p.against_clean)})
    return out


def _adversarial(runs: Mapping[str, RagResults]) -> dict[str, Any] | None:
    """A chart per adversarial condition (its family's rates, a series per run that has it) and a table per run."""
    names = list(runs)
    charts = []
    for condition in dict.fromkeys(c for r in runs.values() for c in r.adversarial):
        having = {name: r.adversarial[condition] for name, r in runs.items() if condition in r.adversarial}
        labels = list(dict.fromkeys(k for entry in having.values() for k in entry.get("rates") or {}))
        if labels:
            charts.append(interval_chart(condition, labels, [
                (name, names.index(name), [((entry.get("rates") or {}).get(k), (entry.get("intervals") or {}).get(k))
                                           for k in labels]) for name, entry in having.items()], width=340))
    tables = []
    for name, r in runs.items():
        if not r.adversarial:
            continue
        rows = []
        for condition, entry in r.adversarial.items():
            rates = entry.get("rates") or {}
            intervals = entry.get("intervals") or {}
            drop = entry.get("drop") or {}
            rows.append({
                "condition": condition, "family": str(entry.get("family", "")), "n": entry.get("n", 0),
                "skipped": entry.get("skipped", 0),
                "rates": [{"name": k, "text": cell(v, intervals.get(k))} for k, v in rates.items()],
                "drop": cell(drop["delta"], drop.get("interval")) if drop.get("n") else "",
                "drop_v": drop.get("delta") if drop.get("n") else None,
                "drop_sign": "" if not drop.get("n") else "neg" if drop["interval"][1] < 0
                else "pos" if drop["interval"][0] > 0 else "",
                "clean": str(entry.get("clean", "")),
                "refusals": (f"{entry['clean_wrong_refusal_rate']:.3f}"
                             if "clean_wrong_refusal_rate" in entry and "refused" in rates else ""),
                "weakest": [f"{key}={value}: {cell(d['delta'], d['interval'])} (n={d['n']})" for key, value, d in
                            sorted(((key, value, s["drop"]) for key, values in (entry.get("slices") or {}).items()
                                    for value, s in values.items() if (s.get("drop") or {}).get("n", 0) >= 5),
                                   key=lambda item: item[2]["delta"])[:3]],
            })
        tables.append({"run": name, "rows": rows})
    return {"charts": charts, "tables": tables} if tables else None


def _slices(runs: Mapping[str, RagResults]) -> list[dict[str, Any]]:
    """Per run and tag, a table per slice metric: a row per tag value, a column per condition."""
    out = []
    for name, r in runs.items():
        for tag, values in r.slices.items():
            conditions = list(dict.fromkeys(c for by in values.values() for c in by))
            tables = []
            for metric in SLICE_METRICS:
                rows = []
                for value, by_condition in values.items():
                    sizes = [n for s in by_condition.values() if (n := _num(s.get("n"))) is not None]
                    size = max(sizes, default=None)
                    rows.append({"cells": [_cell_text(value), {"text": "" if size is None else f"{size:g}",
                                                               "v": size, "cls": ""}]
                                 + [_cell((by_condition.get(c) or {}).get(metric)) for c in conditions]})
                tables.append({"metric": metric, "header": [tag, "n", *conditions], "rows": rows})
            out.append({"run": name, "tag": tag, "tables": tables})
    return out


def _injections(runs: Mapping[str, RagResults]) -> list[dict[str, Any]]:
    out = []
    for name, r in runs.items():
        scans = {role: part["injection"] for role, part in (r.stats.get("llm") or {}).items()
                 if isinstance(part, dict) and isinstance(part.get("injection"), dict)}
        for role, scan in scans.items():
            out.append({"run": name, "part": role, "scanned": str(scan.get("scanned", 0)),
                        "flagged": str(scan.get("flagged", 0)),
                        "patterns": ", ".join(f"{k} {v}" for k, v in (scan.get("patterns") or {}).items()) or "none",
                        "example": str((scan.get("examples") or [{}])[0].get("match", ""))})
    return out


def _comparison(comparison: Comparison | None) -> dict[str, Any] | None:
    if comparison is None:
        return None
    rows = [{"cells": [_cell_text(p.metric), _cell_text(f"{p.b} vs {p.a}"),
                       {"text": f"{p.delta:+.4f}", "v": p.delta,
                        "cls": ("sig neg" if p.delta < 0 else "sig") if p.significant else ""},
                       {"text": str(p.n), "v": p.n, "cls": ""},
                       {"text": f"{p.p_value:.4g}", "v": p.p_value, "cls": ""},
                       {"text": f"{p.p_adjusted:.4g}", "v": p.p_adjusted, "cls": ""}]} for p in comparison.pairs]
    return {"test": comparison.test, "pairs": len(comparison.pairs), "alpha": f"{comparison.alpha:g}",
            "header": ["metric", "pair", "delta", "n", "p", "p_adjusted"], "rows": rows,
            "warnings": comparison.warnings}


def _overview(runs: Mapping[str, RagResults]) -> list[dict[str, Any]]:
    out = []
    for name, r in runs.items():
        config = r.config or {}
        facts = []
        for part in ("retriever", "generator", "claim_judge", "answer_judge", "relevance"):
            value = config.get(part)
            if isinstance(value, dict) and value.get("name"):
                facts.append(f"{part.replace('_', ' ')}: {value['name']}")
        if config.get("k"):
            facts.append(f"k = {config['k']}")
        out.append({"run": name, "questions": len(r.per_question), "conditions": ", ".join(r.conditions),
                    "level": f"{r.confidence_level:.0%}", "facts": facts,
                    "rule": correct_rule(config) if config else "", "notes": notes(r)[1:] if config else notes(r),
                    "warnings": unmeasured_lines(r.unmeasured)})
    return out


def _manifests(runs: Mapping[str, RagResults]) -> list[dict[str, str]]:
    """Each run's settings and counts as its results file holds them (redacted): not ``manifest_dict``, which
    adds the Python and platform of the machine writing the report, not of the one that made the run."""
    from evret_core.io.redact import redact

    out = []
    for name, r in runs.items():
        value = {"schema": r.schema_, "schema_version": r.schema_version, "conditions": r.conditions,
                 "confidence_level": r.confidence_level, "config": redact(r.config), "stats": redact(r.stats)}
        text = json.dumps(value, indent=2, default=str)
        if len(text) > MANIFEST_CHARS:
            text = text[:MANIFEST_CHARS] + f"\n... ({len(text) - MANIFEST_CHARS:,} more characters)"
        out.append({"run": name, "json": text})
    return out


def page_context(runs: Mapping[str, RagResults], comparison: Comparison | None = None) -> dict[str, Any]:
    """Everything the page shows above the question list, and which sections it has (``sections``: id, title)."""
    parts: dict[str, Any] = {
        "overview": _overview(runs), "generation": _generation(runs), "retrieval": _retrieval(runs),
        "attribution": _attribution(runs), "differences": _differences(runs), "adversarial": _adversarial(runs),
        "injections": _injections(runs), "slices": _slices(runs), "comparison": _comparison(comparison),
        "manifests": _manifests(runs), "slice_metrics": list(SLICE_METRICS),
    }
    titles = (("overview", "Overview"), ("generation", "Generation"), ("retrieval", "Retrieval"),
              ("attribution", "Attribution"), ("differences", "Differences"), ("adversarial", "Adversarial"),
              ("slices", "Slices"), ("comparison", "Comparison"))
    parts["sections"] = [{"id": key, "title": title} for key, title in titles if parts[key]]
    return parts


def question_index(runs: Mapping[str, RagResults], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The question list's header and filters, and the JSON index its script filters and sorts by: per question
    (in the page's order) the attribution options it matches, its verdict bits per column (``VERDICT_FILTERS``)
    and the slice options it belongs to. Option values are numbers: no text from the data is compared or parsed
    by the script, only shown (escaped) by the template."""
    several = len(runs) > 1
    names = list(runs)
    labels = [f"{run} \u00b7 {condition}" if several else condition for run, condition in columns(runs)]
    counts_a: dict[tuple[int, str], int] = {}
    counts_s: dict[tuple[str, str], int] = {}
    for q in rows:
        for i, label in enumerate(q["attribution"]):
            if label:
                counts_a[(i, label)] = counts_a.get((i, label), 0) + 1
        for k, v in q["tag_pairs"]:
            counts_s[(str(k), str(v))] = counts_s.get((str(k), str(v)), 0) + 1
    rank = {label: i for i, label in enumerate(ATTRIBUTIONS)}
    attributions = {p: n for n, p in enumerate(sorted(counts_a, key=lambda p: (p[0], rank.get(p[1], len(rank)),
                                                                                 p[1])))}
    slices = {p: n for n, p in enumerate(sorted(counts_s))}
    index = [[[attributions[(i, label)] for i, label in enumerate(q["attribution"]) if label],
              [c["mask"] for c in q["cells"]], [slices[(str(k), str(v))] for k, v in q["tag_pairs"]]] for q in rows]
    return {
        "columns": labels,
        "chip": max(58, min(100, 700 // max(1, len(labels)))),
        "headers": [condition for _, condition in columns(runs)],
        "groups": [{"run": name, "span": len(r.conditions)} for name, r in runs.items()] if several else [],
        "attributions": [{"value": n, "key": attribution_key(names[i], label, several), "n": counts_a[(i, label)]}
                         for (i, label), n in attributions.items()],
        "slices": [{"value": i, "key": f"{k} = {v}", "n": counts_s[(k, v)]} for (k, v), i in slices.items()],
        "verdicts": [{"value": mask, "key": label} for label, mask in VERDICT_FILTERS],
        "data": {"columns": len(labels), "runs": len(runs), "q": index},
    }
