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

Queries past the most that could fit are never built: a run of 200,000 queries read back from a file builds the
records of the few thousand its page can hold, not all of them (:func:`drilldown_data`).

:func:`truncation_notes` says which of these happened, for the page and for stderr. For 2 runs of 1,793 queries
of 10 documents step 1 keeps about 3 MB of text in a 4.8 MB page. The layout (``FORMAT``) is documented in
``docs/results.md``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from evret_core.progress import current_progress, report_progress
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


@dataclass
class _Shown:
    """What the drill-down shows of one query of one run (its first ``MAX_DOCS_PER_QUERY`` documents as
    ``(doc_id, score, text, gain, matched, unmeasured)``), kept instead of the whole :class:`QueryResult`."""

    query_text: str
    tags: dict[str, str]
    answers: list[str]
    by: str
    relevant: dict[str, float]
    scores: dict[str, float]
    unmeasured: int
    n: int
    docs: list[tuple[str, float | None, str | None, float, list[int], list[int]]]

    @classmethod
    def of(cls, q: QueryResult) -> _Shown:
        gains = q.gains
        docs = [(j.doc_id, j.score, j.text, gains[k] if k < len(gains) else 0.0, j.matched, j.unmeasured)
                for k, j in enumerate(q.judgments[:MAX_DOCS_PER_QUERY])]
        return cls(q.query_text, q.tags, q.expected_answers, q.labelled_by, q.relevant_ids, q.scores, q.unmeasured,
                   len(q.judgments), docs)


class _Tables(Protocol):
    def add(self, value: str) -> int: ...


class _NoTable:
    """Stands for a :class:`_Table` when only a lower bound of the size is wanted: every index is 0."""

    def add(self, value: str) -> int:
        return 0


def _run_entry(q: _Shown, metrics: list[str], ids: _Tables, texts: _Tables, cut: Callable[[str], str]) -> dict[str, Any]:
    docs: list[list[Any]] = []
    for doc_id, score, text, gain, matched, unmeasured in q.docs:
        doc: list[Any] = [ids.add(cut(doc_id)), _num(score, 5), texts.add(text) if text else -1, _num(gain, 6)]
        if matched or unmeasured:
            doc.append(matched)
        if unmeasured:
            doc.append(unmeasured)
        docs.append(doc)
    return {"s": [_num(q.scores.get(m), 6) for m in metrics], "u": q.unmeasured, "n": q.n, "d": docs}


def _query_entry(qid: str, present: list[_Shown | None], metrics: list[list[str]], ids: _Tables, texts: _Tables,
                 cut: Callable[[str], str]) -> dict[str, Any]:
    q0 = next(q for q in present if q is not None)
    return {
        "id": cut(qid), "text": cut(q0.query_text),
        "tags": [[cut(k), cut(str(v))] for k, v in q0.tags.items()],
        "answers": [cut(a) for a in q0.answers], "by": q0.by,
        "relevant": [[cut(k), _num(v, 6)] for k, v in q0.relevant.items()] if q0.by == "ids" else [],
        "runs": [None if q is None else _run_entry(q, m, ids, texts, cut) for q, m in zip(present, metrics, strict=True)],
    }


class _Queries:
    """The queries of the runs as the drill-down shows them, built from each run's records once, on first use
    (a results file read back builds a record only when it is looked up)."""

    def __init__(self, data: ReportData, total: int = 0) -> None:
        self.runs = list(data.runs.values())
        self.shown: dict[str, list[_Shown | None]] = {}
        self.progress, self.total = current_progress(), total  # queries built, as the stage "drill-down"

    def __call__(self, qid: str) -> list[_Shown | None]:
        found = self.shown.get(qid)
        if found is None:
            found = self.shown[qid] = [None if (q := r.per_query.get(qid)) is None else _Shown.of(q)
                                       for r in self.runs]
            if self.progress is not None and len(self.shown) % 256 == 0:
                self.progress("drill-down", len(self.shown), self.total)
        return found


def _value(data: ReportData, entries: list[dict[str, Any]], ids: list[str], full: list[str],
           cap: int | None) -> dict[str, Any]:
    """The drill-down value around the query ``entries`` (texts left empty: :func:`_fit` puts them in)."""
    return {
        "format": FORMAT, "runs": data.names, "metrics": [r.metrics for r in data.runs.values()],
        "metric": data.metrics[0] if data.metrics else None, "preview": PREVIEW_CHARS, "cap": None,
        "strings_cut": cap, "total": 0, "ids": ids, "texts": [], "lengths": [len(t) for t in full],
        "queries": entries,
    }


def _build(data: ReportData, order: list[str], cap: int | None,
           queries: _Queries | None = None) -> tuple[dict[str, Any], list[str]]:
    """The value for the queries ``order`` with empty texts (and strings cut to ``cap``), and the distinct texts."""
    shown = queries or _Queries(data)
    ids, texts = _Table(), _Table()
    metrics = [r.metrics for r in data.runs.values()]
    entries = [_query_entry(qid, shown(qid), metrics, ids, texts, lambda t: _cut(t, cap)) for qid in order]
    full = texts.values
    return _value(data, entries, ids.values, full, cap), full


class _Prefixes:
    """The values of every prefix of ``order`` with strings cut to ``STRING_CAP``, each entry built once: a prefix's
    value is the first entries and the first distinct ids and texts of the whole (its tables grow in order), so it
    equals :func:`_build` of that prefix."""

    def __init__(self, data: ReportData, order: list[str], queries: _Queries) -> None:
        self.data = data
        ids, texts = _Table(), _Table()
        metrics = [r.metrics for r in data.runs.values()]
        self.entries: list[dict[str, Any]] = []
        self.counts: list[tuple[int, int]] = [(0, 0)]  # distinct ids and texts after each entry
        for qid in order:
            self.entries.append(_query_entry(qid, queries(qid), metrics, ids, texts, lambda t: _cut(t, STRING_CAP)))
            self.counts.append((len(ids.index), len(texts.index)))
        self.ids, self.texts = ids.values, texts.values

    def value(self, count: int) -> tuple[dict[str, Any], list[str]]:
        n_ids, n_texts = self.counts[count]
        full = self.texts[:n_texts]
        return _value(self.data, self.entries[:count], self.ids[:n_ids], full, STRING_CAP), full


def _fit(value: dict[str, Any], full: list[str], budget: int) -> bool:
    """Put the texts in ``value``, cut to fit ``budget``; whether the whole value fits."""
    rest = _utf8_len(script_json(value)) + 4 * len(full)  # + the quotes and commas of the texts
    value["cap"] = cap = text_cap(full, budget - rest)
    value["texts"] = full if cap is None else [t[:cap] for t in full]
    return rest <= budget


def _shortest(text: str) -> str:
    """``text`` whole or cut to ``STRING_CAP``, whichever is shorter in the page."""
    cut = _cut(text, STRING_CAP)
    return cut if _utf8_len(cut) < _utf8_len(text) else text


def _fitting_bound(data: ReportData, order: list[str], queries: _Queries, budget: int) -> int:
    """A number of queries that no longer prefix of ``order`` can fit in ``budget`` (``len(order) + 1`` when that
    is not ruled out): the queries' entries alone, with every index at its shortest and every string at its
    shortest, already take more. Only the queries up to it are built."""
    metrics = [r.metrics for r in data.runs.values()]
    size = -1
    for count, qid in enumerate(order, start=1):
        size += 1 + _utf8_len(script_json(_query_entry(qid, queries(qid), metrics, _NoTable(), _NoTable(),
                                                       _shortest)))
        if size > budget:
            return count
    return len(order) + 1


def drilldown_data(data: ReportData, budget: int = DATA_BUDGET) -> dict[str, Any]:
    """The queries of every run of ``data`` (first run's order, then queries only later runs have), degraded as
    the module says until the JSON fits ``budget`` bytes: every query with its texts cut when possible. Queries
    that cannot fit are never built (see :func:`_fitting_bound`)."""
    runs = list(data.runs.values())
    order = list(runs[0].per_query)
    seen = set(order)
    for r in runs[1:]:
        order += [qid for qid in r.per_query if qid not in seen]
        seen.update(r.per_query)
    queries = _Queries(data, len(order))
    report_progress(queries.progress, "drill-down", 0, len(order))
    bound = _fitting_bound(data, order, queries, budget)
    if bound > len(order):
        value, full = _build(data, order, None, queries)
        fits = _fit(value, full, budget)
        if not fits:
            value, full = _build(data, order, STRING_CAP, queries)
            fits = _fit(value, full, budget)
    else:
        fits = False  # not even the queries' entries fit: as both tries above would find
    if not fits:
        low, high = 0, min(len(order), bound) - 1  # the most queries that fit (0 always does, or nothing would)
        prefixes = _Prefixes(data, order[: high + 1], queries)
        while low < high:
            mid = (low + high + 1) // 2
            trial, texts = prefixes.value(mid)
            low, high = (mid, high) if _fit(trial, texts, budget) else (low, mid - 1)
        value, full = prefixes.value(low)
        _fit(value, full, budget)
    value["total"] = len(order)
    report_progress(queries.progress, "drill-down", len(order), len(order))  # the rest is never built
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
