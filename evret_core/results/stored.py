"""Retrieval results files read as columns: the per-query records are decoded one at a time, their numbers kept as
columns and their bytes kept as they are, so a file is held in about its own size and a query's
:class:`~evret_core.results.per_query.QueryResult` is built only when that query is asked for.

Read whole by ``json.loads``, a 557 MB results file of 200,000 queries takes about 2.7 GB of Python objects (and
pydantic models on top of that). :func:`read_results` reads the document a window of a few megabytes at a time
with the standard library's JSON scanner: every top-level field but ``per_query`` is decoded as usual, and each
``per_query`` record is decoded, validated (against the fields of :class:`QueryResult`, without building one), reduced
to its scores, tags and ranked relevance, and dropped. What stays is :class:`StoredQueries`: the file's bytes,
each record's byte range and those columns.

A file that is not plain valid JSON of the retrieval schema (a syntax error, a record that fails validation, a
repeated key, a string holding a surrogate escape, a RAG file that has a ``per_query`` field) is read again whole
by the reader of every other document (:func:`~evret_core.io.jsonio.read_document`), so its error is exactly
that reader's; every check of the numbers (:func:`~evret_core.results.evaluation.check_results`) runs on the
columns, with the same errors.
"""

from __future__ import annotations

import codecs
import json
import re
import typing
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.progress import current_progress, report_progress
from evret_core.results.per_query import Judgment, QueryColumns, QueryResult, RankColumns, RankRows, _columns

__all__ = ["StoredQueries", "read_results", "record_validator"]

WINDOW = 8 << 20
"""Bytes of the file decoded at a time (a record longer than that widens the window)."""
_WS = re.compile(r"[ \t\n\r]*")
_KEY = re.compile(r'[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:')  # a key json reads as it is written
_AFTER = re.compile(r"[ \t\n\r]*([,}])")
# what loads_json looks at after decoding: a file holding one is read whole (see the module)
_PROGRESS_EVERY = 2048  # records between progress reports
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_EMPTY_TAGS: Mapping[str, str] = {}


class _Fallback(Exception):
    """This file is read whole instead (see the module)."""


def _record_type(model: type[Any], name: str, nested: dict[Any, Any]) -> Any:
    """A TypedDict with ``model``'s fields (those with defaults not required) and its config, for validating a
    record without building the model."""
    import typing_extensions

    def swap(annotation: Any) -> Any:
        if annotation in nested:
            return nested[annotation]
        args = typing.get_args(annotation)
        origin = typing.get_origin(annotation)
        if args and origin in (list, dict):
            return dict[swap(args[0]), swap(args[1])] if origin is dict else list[swap(args[0])]  # type: ignore[misc]
        return annotation

    optional = typing_extensions.NotRequired
    fields = {key: swap(f.annotation) if f.is_required() else optional[swap(f.annotation)]
              for key, f in model.model_fields.items()}
    record = getattr(typing_extensions, "TypedDict")(name, fields)  # noqa: B009 - a name mypy cannot check
    record.__pydantic_config__ = model.model_config
    return record


_RECORD_VALIDATOR: Any = None


def record_validator() -> Any:
    """A pydantic ``TypeAdapter`` that validates a ``per_query`` record exactly as :class:`QueryResult` does and
    returns it as a dict (fields with defaults left out when absent)."""
    global _RECORD_VALIDATOR
    if _RECORD_VALIDATOR is None:
        from pydantic import TypeAdapter

        judgment = _record_type(Judgment, "JudgmentRecord", {})
        _RECORD_VALIDATOR = TypeAdapter(_record_type(QueryResult, "QueryRecord", {Judgment: judgment}))
    return _RECORD_VALIDATOR


class StoredQueries(Mapping[str, QueryResult]):
    """query id -> :class:`QueryResult` of a results file read back, built from the record's bytes on each lookup
    (not cached: look a query up once and keep it); iterating builds one query at a time. The numbers are columns
    (:meth:`query_columns`, :attr:`ranks`), read without building any record."""

    def __init__(self, source: str, data: bytes, starts: np.ndarray, ends: np.ndarray, columns: QueryColumns,
                 ranks: RankColumns, index: dict[str, int]) -> None:
        self.source = source
        self._data = data
        self._starts = starts
        self._ends = ends
        self.columns = columns
        self.ranks = ranks
        self._index = index

    def __len__(self) -> int:
        return len(self.columns.ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns.ids)

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._index

    def __getitem__(self, query_id: str) -> QueryResult:
        return self.at(self._index[query_id])

    def at(self, row: int) -> QueryResult:
        """The record of row ``row`` (file order) as a :class:`QueryResult`."""
        text = self._data[int(self._starts[row]) : int(self._ends[row])].decode("utf-8")
        return QueryResult.model_validate(json.loads(text))  # validated when the file was read

    def query_columns(self) -> QueryColumns:
        return self.columns

    def tags(self) -> list[Mapping[str, str]]:
        return list(self.columns.tags)

    @property
    def nbytes(self) -> int:
        """Bytes held: the file and the columns."""
        arrays = [self._starts, self._ends, self.ranks.num_ret, self.ranks.qrel_lengths, self.ranks.ranks,
                  self.ranks.grades, self.ranks.answers, *self.columns.values.values(),
                  *self.columns.present.values()]
        return len(self._data) + sum(a.nbytes for a in arrays)


class _Window:
    """The document's bytes decoded a window at a time; ``c`` is the cursor, a character index into ``text``."""

    def __init__(self, data: bytes, start: int) -> None:
        self.data = data
        self.size = len(data)
        self.scan: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner of json.loads
        self.begin = self.end = start  # byte offsets of the window
        self.text = ""
        self.final = False
        self.c = self.start = 0  # the cursor, and where the last value read began
        self._anchor = (start, 0)  # (byte, char) pair known to match, for windows with non-ASCII text
        self.load(start, WINDOW)

    def load(self, at: int, size: int) -> None:
        end = min(self.size, at + size)
        while end < self.size and (self.data[end] & 0xC0) == 0x80:  # not inside a character
            end -= 1
        try:
            self.text = str(memoryview(self.data)[at:end], "utf-8")
        except UnicodeDecodeError:
            raise _Fallback from None
        self.begin, self.end, self.final, self.c = at, end, end >= self.size, 0
        self._anchor = (at, 0)

    def byte(self, c: int) -> int:
        """The byte offset of character ``c`` of the window (asked in increasing order)."""
        if self.text.isascii():
            return self.begin + c
        at, known = self._anchor
        if c < known:
            at, known = self.begin, 0
        at += len(self.text[known:c].encode("utf-8"))
        self._anchor = (at, c)
        return at

    def more(self, widen: bool) -> None:
        """A fresh window from the cursor (twice as wide when ``widen``: a value did not fit)."""
        at = self.byte(self.c)
        self.load(at, max(WINDOW, 2 * (self.end - self.begin)) if widen else WINDOW)

    def ws(self) -> None:
        while True:
            self.c = _WS.match(self.text, self.c).end()  # type: ignore[union-attr]
            if self.c < len(self.text) or self.final:
                return
            self.more(False)

    def peek(self) -> str:
        self.ws()
        return self.text[self.c] if self.c < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise _Fallback
        self.c += 1

    def value(self) -> Any:
        """The JSON value at the cursor (after whitespace); the cursor moves past it."""
        self.ws()
        while True:
            try:
                value, end = self.scan(self.text, self.c)
            except (StopIteration, json.JSONDecodeError):
                if self.final:
                    raise _Fallback from None
                self.more(widen=self.c == 0)
                continue
            except RecursionError:
                raise _Fallback from None
            if end == len(self.text) and not self.final:  # a number may go on past the window
                self.more(widen=self.c == 0)
                continue
            self.start, self.c = self.c, end
            return value


class _Records:
    """The columns gathered from ``per_query``'s records as they are read."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.starts = array("q")  # machine numbers, not Python objects: 8 bytes each
        self.ends = array("q")
        self.found: dict[str, tuple[array[int], array[float]]] = {}
        self.tags: list[Mapping[str, str]] = []
        self.mismatched: dict[int, str] = {}
        self.ranks = RankRows()

    def add(self, key: str, record: dict[str, Any], start: int, end: int) -> None:
        row = len(self.ids)
        if key in self.index:  # a repeated key: json keeps the last record, in the first one's place
            raise _Fallback
        self.index[key] = row
        self.ids.append(key)
        self.starts.append(start)
        self.ends.append(end)
        if record["query_id"] != key:
            self.mismatched[row] = record["query_id"]
        for metric, value in record["scores"].items():
            found = self.found.get(metric)
            if found is None:
                found = self.found[metric] = (array("q"), array("d"))
            found[0].append(row)
            found[1].append(value)
        self.tags.append(record.get("tags") or _EMPTY_TAGS)
        judgments = record.get("judgments", ())
        # the ranking as scored (QueryResult.ranking)
        ranking = [j["doc_id"] if (doc := j.get("assigned")) is None else doc for j in judgments]
        answers = len(record.get("expected_answers") or ())
        by_text = answers > 0 and record.get("labelled_by", "text") == "text"
        self.ranks.add(ranking, record.get("relevant_ids"),
                       [j.get("matched", ()) for j in judgments] if by_text else None, answers)

    def stored(self, source: str, data: bytes) -> StoredQueries:
        columns = _columns(self.ids, self.found, self.tags, self.mismatched)
        return StoredQueries(source, data, np.frombuffer(self.starts, dtype=np.int64),
                             np.frombuffer(self.ends, dtype=np.int64), columns, self.ranks.columns(), self.index)


def _per_query(window: _Window, source: str, data: bytes, stage: str) -> StoredQueries:
    """``per_query``'s records, from its opening brace at the cursor."""
    validate = record_validator().validate_python
    from pydantic import ValidationError

    progress = current_progress()
    records = _Records()
    window.expect("{")
    if window.peek() == "}":
        window.c += 1
        return records.stored(source, data)
    while True:
        found = _KEY.match(window.text, window.c)  # the usual key: no escapes, in this window
        if found is not None:
            key, window.c = found.group(1), found.end()
        else:
            if window.peek() != '"':
                raise _Fallback
            key = window.value()
            window.expect(":")
        record = window.value()
        if type(record) is not dict:
            raise _Fallback
        try:
            record = validate(record)
        except ValidationError:
            raise _Fallback from None
        records.add(key, record, window.byte(window.start), window.byte(window.c))
        if progress is not None and len(records.ids) % _PROGRESS_EVERY == 0:
            progress(stage, window.byte(window.c), len(data))
        found = _AFTER.match(window.text, window.c)
        if found is not None and (found.end() < len(window.text) or window.final):
            after, window.c = found.group(1), found.end()
        else:
            after = window.peek()
            window.c += 1
        if after == "}":
            return records.stored(source, data)
        if after != ",":
            raise _Fallback


def read_results(path_or_text: str | Path) -> tuple[dict[str, Any], StoredQueries | None, str] | None:
    """The results document at ``path_or_text`` (a path, or the JSON text itself) as (every top-level field but
    ``per_query``, ``per_query`` as :class:`StoredQueries` or None when the document has none, the name errors
    use), or None when the document must be read whole (see the module). Progress goes to the current progress
    callback (:func:`evret_core.progress.current_progress`) as ``read NAME``, by bytes."""
    try:
        return _read(path_or_text)
    except _Fallback:
        return None


def _read(path_or_text: str | Path) -> tuple[dict[str, Any], StoredQueries | None, str]:
    if isinstance(path_or_text, Path) or not str(path_or_text).lstrip().startswith("{"):
        source = str(path_or_text)
        stage = f"read {Path(path_or_text).name}"
        try:
            data = Path(path_or_text).read_bytes()
        except OSError:
            raise _Fallback from None
    else:
        from evret_core.results.model import Results

        source, stage = Results.TEXT_SOURCE, "read"
        try:
            data = str(path_or_text).encode("utf-8")
        except UnicodeEncodeError:
            raise _Fallback from None
    if _SURROGATE_ESCAPE.search(data):
        raise _Fallback
    progress = current_progress()
    report_progress(progress, stage, 0, len(data))
    window = _Window(data, len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
    head: dict[str, Any] = {}
    stored: StoredQueries | None = None
    window.expect("{")
    if window.peek() == "}":
        raise _Fallback  # an empty document: not a results file, as the whole reader says
    while True:
        if window.peek() != '"':
            raise _Fallback
        key = window.value()
        window.expect(":")
        if key in head or (key == "per_query" and stored is not None):
            raise _Fallback
        if key == "per_query" and window.peek() == "{":
            stored = _per_query(window, source, data, stage)
        else:
            head[key] = window.value()
        after = window.peek()
        window.c += 1
        if after == "}":
            break
        if after != ",":
            raise _Fallback
    if window.peek() != "":
        raise _Fallback  # something after the document
    if stored is not None and "schema" in head:
        raise _Fallback  # a RAG file (or one that names another schema) with a per_query field
    report_progress(progress, stage, len(data), len(data))
    return head, stored, source
