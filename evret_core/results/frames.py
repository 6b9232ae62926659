"""Results as tables: one row per query or one row per judged document, for pandas or a CSV file.

``rows(results, level)`` yields plain dicts (standard library only); :func:`to_pandas` builds a DataFrame from them
(pandas is an optional extra: ``pip install pandas``) and :func:`to_csv` writes CSV without pandas
(:func:`runs_to_csv` for several runs, as ``evret report --format csv`` writes them).

- ``level="query"``: ``query_id``, ``query_text``, ``labelled_by``, ``unmeasured``, one column per metric, and one
  ``tag:NAME`` column per tag.
- ``level="judgment"``: ``query_id``, ``rank``, ``doc_id``, ``score``, ``assigned`` (the id the document scored
  as), ``relevant`` (its gain counted at that rank), ``matched`` and ``unmeasured`` (answer indexes joined by ``;``)
  and ``text``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from evret_core.contracts.errors import EvretError

LEVELS = ("query", "judgment")


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise EvretError(f"unknown table level {level!r}; use one of {', '.join(LEVELS)}")


def columns(results: Any, level: str = "query") -> list[str]:
    """The column names of :func:`rows` for ``results``, in order."""
    _check_level(level)
    if level == "judgment":
        return ["query_id", "rank", "doc_id", "score", "assigned", "relevant", "matched", "unmeasured", "text"]
    from evret_core.results.per_query import query_columns

    tags = sorted({key for row in query_columns(results.per_query).tags for key in row})  # no record built
    return ["query_id", "query_text", "labelled_by", "unmeasured", *results.metrics, *(f"tag:{t}" for t in tags)]


def rows(results: Any, level: str = "query") -> Iterator[dict[str, Any]]:
    """One dict per query (or per judged document), keyed by :func:`columns`."""
    from evret_core.progress import current_progress

    _check_level(level)
    names = columns(results, level)
    progress, total = current_progress(), len(results.per_query)
    for done, (qid, qr) in enumerate(results.per_query.items()):
        if progress is not None and done % 2048 == 0:
            progress("rows", done, total)
        if level == "query":
            row: dict[str, Any] = dict.fromkeys(names)
            row.update(query_id=qid, query_text=qr.query_text, labelled_by=qr.labelled_by,
                       unmeasured=qr.unmeasured)
            row.update({m: qr.scores.get(m) for m in results.metrics})
            row.update({f"tag:{k}": v for k, v in qr.tags.items()})
            yield row
            continue
        gains = qr.gains
        for judgment, gain in zip(qr.judgments, gains, strict=True):
            yield {
                "query_id": qid, "rank": judgment.rank, "doc_id": judgment.doc_id, "score": judgment.score,
                "assigned": judgment.assigned if judgment.assigned is not None else judgment.doc_id,
                "relevant": gain, "matched": ";".join(map(str, judgment.matched)),
                "unmeasured": ";".join(map(str, judgment.unmeasured)), "text": judgment.text,
            }
    if progress is not None:
        progress("rows", total, total)


def to_pandas(results: Any, level: str = "query") -> Any:
    """A pandas DataFrame of :func:`rows` (pandas is the optional extra ``evret-core[pandas]``)."""
    _check_level(level)
    try:
        import pandas as pd
    except ImportError:
        raise EvretError('to_pandas() needs pandas: pip install pandas') from None
    return pd.DataFrame(list(rows(results, level)), columns=columns(results, level))


def to_csv(results: Any, level: str = "query") -> str:
    """:func:`rows` as CSV text (a header line, then one line per row; empty cells for missing values)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns(results, level), lineterminator="\n")
    writer.writeheader()
    for row in rows(results, level):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def runs_to_csv(runs: dict[str, Any], level: str = "query") -> str:
    """Several runs in one CSV table, a ``run`` column first (each run's metric and tag columns, in order)."""
    names: list[str] = ["run"]
    for results in runs.values():
        names += [c for c in columns(results, level) if c not in names]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for run_name, results in runs.items():
        for row in rows(results, level):
            writer.writerow({"run": run_name, **{k: "" if v is None else v for k, v in row.items()}})
    return buffer.getvalue()
