"""The per-query drill-down of the HTML report as one compact JSON value, drawn by the page's script.

Every query of every run is in it, but each distinct document text and document id is stored once (runs and
queries that retrieve the same passage share it), numbers are rounded to what the page shows, and the page builds
a query's markup only when it is opened. Texts are kept whole while the distinct texts fit ``TEXT_BUDGET`` bytes;
beyond that each is cut to the longest length that fits (never below ``PREVIEW_CHARS``) and the page says how many
characters the results file holds. ``DATA_BUDGET`` bounds the whole JSON value: the texts get what the queries
leave (for 2 runs of 1,793 queries of 10 documents that is about 3 MB of text, in a 4.8 MB page). The layout (``FORMAT``) is documented in ``docs/results.md``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from evret_core.report.common import ReportData
from evret_core.results import QueryResult

FORMAT = 1
MAX_DOCS_PER_QUERY = 20
PREVIEW_CHARS = 300
DATA_BUDGET = 4_600_000

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
    when they fit whole. Never below ``PREVIEW_CHARS``, so a page with very many texts can exceed the budget."""
    sizes = [(len(t), _utf8_len(t)) for t in texts]
    if sum(b for _, b in sizes) <= budget:
        return None

    def cost(cap: int) -> int:
        return sum(b if c <= cap else math.ceil(cap * b / c) for c, b in sizes)

    low, high = PREVIEW_CHARS, max(c for c, _ in sizes)
    if cost(low) > budget:
        return low
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


def _run_entry(q: QueryResult, metrics: list[str], ids: _Table, texts: _Table) -> dict[str, Any]:
    gains = q.gains
    docs: list[list[Any]] = []
    for k, j in enumerate(q.judgments[:MAX_DOCS_PER_QUERY]):
        doc: list[Any] = [ids.add(j.doc_id), _num(j.score, 5), texts.add(j.text) if j.text else -1,
                          _num(gains[k] if k < len(gains) else 0.0, 6)]
        if j.matched or j.unmeasured:
            doc.append(j.matched)
        if j.unmeasured:
            doc.append(j.unmeasured)
        docs.append(doc)
    return {"s": [_num(q.scores.get(m), 6) for m in metrics], "u": q.unmeasured, "n": len(q.judgments), "d": docs}


def drilldown_data(data: ReportData, budget: int = DATA_BUDGET) -> dict[str, Any]:
    """Every query of every run of ``data`` (first run's order, then queries only later runs have), with the
    distinct document texts cut so that the JSON stays within ``budget`` bytes when that is possible."""
    runs = list(data.runs.values())
    order = list(runs[0].per_query)
    seen = set(order)
    for r in runs[1:]:
        order += [qid for qid in r.per_query if qid not in seen]
        seen.update(r.per_query)
    ids, texts = _Table(), _Table()
    queries = []
    for qid in order:
        present = [r.per_query.get(qid) for r in runs]
        q0 = next(q for q in present if q is not None)
        queries.append({
            "id": qid, "text": q0.query_text, "tags": [[k, v] for k, v in q0.tags.items()],
            "answers": q0.expected_answers, "by": q0.labelled_by,
            "relevant": [[k, _num(v, 6)] for k, v in q0.relevant_ids.items()] if q0.labelled_by == "ids" else [],
            "runs": [None if q is None else _run_entry(q, r.metrics, ids, texts) for q, r in zip(present, runs, strict=True)],
        })
    full = texts.values
    value: dict[str, Any] = {
        "format": FORMAT, "runs": data.names, "metrics": [r.metrics for r in runs],
        "metric": data.metrics[0] if data.metrics else None, "preview": PREVIEW_CHARS, "cap": None,
        "ids": ids.values, "texts": [], "lengths": [len(t) for t in full], "queries": queries,
    }
    rest = _utf8_len(script_json(value)) + 4 * len(full)  # + the quotes and commas of the texts
    value["cap"] = cap = text_cap(full, budget - rest)
    value["texts"] = full if cap is None else [t[:cap] for t in full]
    return value
