"""The per-query drill-down of the HTML report as one compact JSON value, drawn by the page's script.

Each distinct document text and document id is stored once (runs and queries that retrieve the same passage share
it), numbers are rounded to what the page shows, and the page builds a query's markup only when it is opened.

The value always fits its byte budget (the HTML page gives it what is left of ``PAGE_BUDGET``, 5 MB, after the rest
of the page), degrading in this order until it does:

1. the distinct document texts are cut to the longest common length that fits (no floor: with 72,000 distinct
   texts that can be a few dozen characters); the page says how many characters the results file holds;
2. when even empty texts do not fit, query texts, expected answers, tags and ids are cut to ``STRING_CAP``
   characters too;
3. when that still does not fit, the drill-down holds the first queries only (the first run's order).

:func:`truncation_notes` says which of these happened, for the page and for stderr. For 2 runs of 1,793 queries
of 10 documents step 1 keeps about 3 MB of text in a 4.8 MB page. The layout (``FORMAT``) is documented in
``docs/results.md``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from evret_core.report.common import ReportData
from evret_core.results.evaluation import QueryResult

FORMAT = 1
MAX_DOCS_PER_QUERY = 20
PREVIEW_CHARS = 300
PAGE_BUDGET = 5_000_000  # bytes of the whole HTML page, whatever the data
DATA_BUDGET = 4_600_000  # the drill-down's budget when the caller gives none
STRING_CAP = 200  # step 2: query texts, answers, tags and ids cut to this many characters

_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")


def script_json(value: Any) -> str:
    """``value`` as JSON that can sit inside a ``<script>`` element: no ``<``, ``>`` or ``&`` (so no
    ``</script>`` or ``<!--``), and lone surrogates replaced by U+FFFD, as in the page's HTML text (browsers
    cannot show them, and Chromium's DOM serialiser aborts on them)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _SCRIPT_UNSAFE.sub(lambda m: _SCRIPT_ESCAPES.get(m.group(), "\ufffd"), text)


def _num(value: float | None, digits: int) -> float | int | None:
    if value is None or not math.isfinite(value):
        return None
    rounded = float(f"{value:.{digits}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def text_cap(texts: list[str], budget: int) -> int | None:
    """The longest cut (in characters) that keeps the distinct ``texts`` within ``budget`` UTF-8 bytes; ``None``
    when they fit whole, 0 when not even one character each fits."""
    sizes = [(len(t), _utf8_len(t)) for t in texts]
    if not sizes or sum(b for _, b in sizes) <= budget:
        return None

    def cost(cap: int) -> int:
        return sum(b if c <= cap else math.ceil(cap * b / c) for c, b in sizes)

    low, high = 0, max(c for c, _ in sizes)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if cost(mid) <= budget else (low, mid - 1)
    return low


class _Table:
    """Distinct strings, each stored once and referred to by its index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def add(self, value: str) -> int:
        return self.index.setdefault(value, len(self.index))

    @property
    def values(self) -> list[str]:
        return list(self.index)


def _cut(text: str, cap: int | None) -> str:
    return text if cap is None or len(text) <= cap else text[:cap] + "\u2026"


def _run_entry(q: QueryResult, metrics: list[str], ids: _Table, texts: _Table, cap: int | None) -> dict[str, Any]:
    gains = q.gains
    docs: list[list[Any]] = []
    for k, j in enumerate(q.judgments[:MAX_DOCS_PER_QUERY]):
        doc: list[Any] = [ids.add(_cut(j.doc_id, cap)), _num(j.score, 5), texts.add(j.text) if j.text else -1,
                          _num(gains[k] if k < len(gains) else 0.0, 6)]
        if j.matched or j.unmeasured:
            doc.append(j.matched)
        if j.unmeasured:
            doc.append(j.unmeasured)
        docs.append(doc)
    return {"s": [_num(q.scores.get(m), 6) for m in metrics], "u": q.unmeasured, "n": len(q.judgments), "d": docs}


def _build(data: ReportData, order: list[str], cap: int | None) -> tuple[dict[str, Any], list[str]]:
    """The value for the queries ``order`` with empty texts (and strings cut to ``cap``), and the distinct texts."""
    runs = list(data.runs.values())
    ids, texts = _Table(), _Table()
    queries = []
    for qid in order:
        present = [r.per_query.get(qid) for r in runs]
        q0 = next(q for q in present if q is not None)
        queries.append({
            "id": _cut(qid, cap), "text": _cut(q0.query_text, cap),
            "tags": [[_cut(k, cap), _cut(str(v), cap)] for k, v in q0.tags.items()],
            "answers": [_cut(a, cap) for a in q0.expected_answers], "by": q0.labelled_by,
            "relevant": [[_cut(k, cap), _num(v, 6)] for k, v in q0.relevant_ids.items()]
            if q0.labelled_by == "ids" else [],
            "runs": [None if q is None else _run_entry(q, r.metrics, ids, texts, cap)
                     for q, r in zip(present, runs, strict=True)],
        })
    full = texts.values
    value: dict[str, Any] = {
        "format": FORMAT, "runs": data.names, "metrics": [r.metrics for r in runs],
        "metric": data.metrics[0] if data.metrics else None, "preview": PREVIEW_CHARS, "cap": None,
        "strings_cut": cap, "total": 0, "ids": ids.values, "texts": [], "lengths": [len(t) for t in full],
        "queries": queries,
    }
    return value, full


def _fit(value: dict[str, Any], full: list[str], budget: int) -> bool:
    """Put the texts in ``value``, cut to fit ``budget``; whether the whole value fits."""
    rest = _utf8_len(script_json(value)) + 4 * len(full)  # + the quotes and commas of the texts
    value["cap"] = cap = text_cap(full, budget - rest)
    value["texts"] = full if cap is None else [t[:cap] for t in full]
    return rest <= budget


def drilldown_data(data: ReportData, budget: int = DATA_BUDGET) -> dict[str, Any]:
    """The queries of every run of ``data`` (first run's order, then queries only later runs have), degraded as
    the module says until the JSON fits ``budget`` bytes: every query with its texts cut when possible."""
    runs = list(data.runs.values())
    order = list(runs[0].per_query)
    seen = set(order)
    for r in runs[1:]:
        order += [qid for qid in r.per_query if qid not in seen]
        seen.update(r.per_query)
    value, full = _build(data, order, None)
    if not _fit(value, full, budget):
        value, full = _build(data, order, STRING_CAP)
        if not _fit(value, full, budget):
            low, high = 0, len(order) - 1  # the most queries that fit (0 always does, or nothing would)
            while low < high:
                mid = (low + high + 1) // 2
                trial, texts = _build(data, order[:mid], STRING_CAP)
                low, high = (mid, high) if _fit(trial, texts, budget) else (low, mid - 1)
            value, full = _build(data, order[:low], STRING_CAP)
            _fit(value, full, budget)
    value["total"] = len(order)
    return value


def truncation_notes(value: dict[str, Any]) -> list[str]:
    """What the drill-down ``value`` leaves out to fit its budget, one sentence each (empty when nothing)."""
    notes = []
    shown, total = len(value["queries"]), value["total"]
    if shown < total:
        notes.append(f"the per-query drill-down holds the first {shown} of {total} queries: the others do not fit "
                     f"the report's {PAGE_BUDGET / 1e6:g} MB budget (the results file holds them all)")
    if value["cap"] is not None:
        cut = sum(1 for n in value["lengths"] if n > value["cap"])
        notes.append(f"{cut} of {len(value['lengths'])} distinct document texts are cut to {value['cap']} "
                     f"characters to fit the report's {PAGE_BUDGET / 1e6:g} MB budget (the results file holds "
                     f"them whole)")
    if value["strings_cut"] is not None:
        notes.append(f"query texts, expected answers, tags and ids longer than {value['strings_cut']} characters "
                     f"are cut in the drill-down")
    return notes
