"""TREC qrels and run files: read them into the dict formats of pytrec_eval and ranx, write runs back.

qrels: ``query_id iteration doc_id grade`` per line. run: ``query_id Q0 doc_id rank score run_tag`` per line
(fields after the sixth are ignored, as trec_eval does). Fields are separated by any whitespace, so ids may
contain any other character ('#', ':', '/'...). Blank lines and lines whose first field starts with '#' are
skipped. Every error names the file and line.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from evret_core.errors import EvretError
from evret_core.outputs import write_output

__all__ = ["Qrels", "Run", "TrecRun", "read_qrels", "read_run", "write_run", "ranked_docs"]

Qrels = dict[str, dict[str, float]]
Run = dict[str, dict[str, float]]


class TrecRun(dict[str, dict[str, float]]):
    """A run read from a file: ``{query_id: {doc_id: score}}`` plus the run tag of its first line."""

    tag: str = ""


def open_binary(path: Path) -> BinaryIO:
    """``path`` opened for reading bytes, or an EvretError that says it is missing or a folder."""
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise EvretError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise EvretError(f"{path}: is a folder, not a file") from None


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    with open_binary(path) as handle:
        # decoded line by line, so that a bad byte is reported with its line (a text stream decodes ahead)
        for lineno, raw in enumerate(handle, start=1):
            fields = line_fields(raw, lineno, path)
            if fields is not None:
                yield lineno, fields


def line_fields(raw: bytes, lineno: int, path: Path | str) -> list[str] | None:
    """One line's whitespace-separated fields, or None for a blank or comment line; bad UTF-8 is an error
    naming the file, line and column (a byte-order mark is dropped from line 1)."""
    try:
        line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        bad = " ".join(f"0x{b:02x}" for b in raw[exc.start : exc.end])
        raise EvretError(f"{path}:{lineno}: not UTF-8 text (byte {bad} at column {exc.start + 1})") from None
    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return None
    return fields


def run_fields(fields: list[str], where: str) -> tuple[str, str, float, str]:
    """A run line's query id, document id, score and run tag (an error naming ``where`` when it is bad)."""
    if len(fields) < 6:
        raise EvretError(f"{where}: expected 6 fields (query_id Q0 doc_id rank score run_tag), got {len(fields)}")
    return fields[0], fields[2], _number(fields[4], "score", where), fields[5]


def duplicate_error(where: str, qid: str, doc: str, first: int) -> EvretError:
    """The error for a document ranked twice for one query (``first``: the line it was first ranked on)."""
    return EvretError(f"{where}: query {qid}: document {doc!r} is ranked twice (first on line {first})")


def _number(text: str, what: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise EvretError(f"{where}: {what} {text!r} is not a number") from None
    if math.isnan(value):
        raise EvretError(f"{where}: {what} is NaN")
    return value


def read_qrels(path: str | Path, queries: Container[str] | None = None) -> Qrels:
    """Read a TREC qrels file into ``{query_id: {doc_id: grade}}``; a document judged twice is an error.

    ``queries``: keep only these queries' judgments (a shard of a big run needs only its own; every line is
    still checked for its number of fields).
    """
    path = Path(path)
    qrels: Qrels = {}
    for lineno, fields in _lines(path):
        where = f"{path}:{lineno}"
        if len(fields) != 4:
            raise EvretError(
                f"{where}: expected 4 fields (query_id iteration doc_id grade), got {len(fields)}"
            )
        qid, _, doc, grade = fields
        if queries is not None and qid not in queries:
            continue
        judged = qrels.setdefault(qid, {})
        if doc in judged:
            raise EvretError(f"{where}: query {qid}: document {doc!r} is judged twice")
        judged[doc] = _number(grade, "grade", where)
    return qrels


def read_run(path: str | Path) -> TrecRun:
    """Read a TREC run file into ``{query_id: {doc_id: score}}`` (the rank column is ignored, as in trec_eval).

    A document listed twice for a query is an error naming the query, the document and both lines.
    """
    path = Path(path)
    run = TrecRun()
    first_line: dict[tuple[str, str], int] = {}
    for lineno, fields in _lines(path):
        where = f"{path}:{lineno}"
        qid, doc, score, tag = run_fields(fields, where)
        if not run.tag:
            run.tag = tag
        docs = run.setdefault(qid, {})
        if doc in docs:
            raise duplicate_error(where, qid, doc, first_line[(qid, doc)])
        first_line[(qid, doc)] = lineno
        docs[doc] = score
    return run


def ranked_docs(scores: Mapping[str, float]) -> list[str]:
    """A query's documents in trec_eval order: score descending, ties by document id in descending order."""
    # two stable sorts: by id descending, then by score descending (reverse=True keeps ties in place)
    return sorted(sorted(scores, reverse=True), key=scores.__getitem__, reverse=True)


def write_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str = "evret") -> None:
    """Write ``{query_id: {doc_id: score}}`` as a TREC run, each query's documents in trec_eval order."""
    if not tag or any(c.isspace() for c in tag):
        raise EvretError(f"write_run: the run tag must be a non-empty word without spaces, got {tag!r}")
    lines: list[str] = []
    for qid, scores in run.items():
        qid = str(qid)
        if not qid or any(c.isspace() for c in qid):
            raise EvretError(f"write_run: query id {qid!r} is empty or contains whitespace")
        for rank, doc in enumerate(ranked_docs(scores), start=1):
            if not doc or any(c.isspace() for c in doc):
                raise EvretError(f"write_run: query {qid}: document id {doc!r} is empty or contains whitespace")
            lines.append(f"{qid} Q0 {doc} {rank} {float(scores[doc])!r} {tag}\n")
    write_output(path, "".join(lines))
