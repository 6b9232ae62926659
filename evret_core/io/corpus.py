"""Reading document corpora (BEIR's ``corpus.jsonl``), with errors that name the file and line.

One reader of the corpus format for the core and every plugin, so that a corpus that loads for one retriever loads
for all of them. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.jsonio import iter_json_lines

ID_FIELDS = ("_id", "doc_id", "id")
"""The fields a corpus record may carry its id in, in order of preference."""


def iter_corpus(path: str | Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``("file:line", doc id, record)`` for each document of a JSONL corpus, checked as it is read.

    A record is an object with an id (``_id``, ``doc_id`` or ``id``), a string ``text`` and optionally a string
    ``title``; other fields are kept in the record. A repeated id is an error.
    """
    seen: dict[str, int] = {}
    for lineno, where, record in iter_json_lines(path, what="corpus file"):
        if not isinstance(record, dict):
            raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
        key = next((key for key in ID_FIELDS if record.get(key) not in (None, "")), None)
        if key is None:
            raise EvretError(f"{where}: the record has no '_id', 'doc_id' or 'id' field")
        if isinstance(record[key], (dict, list, bool)):
            raise EvretError(f"{where}: field {key!r} is not a string or a number")
        doc_id = str(record[key])
        if not isinstance(record.get("text"), str):
            raise EvretError(f"{where}: field 'text' is missing or not a string")
        if record.get("title") is not None and not isinstance(record["title"], str):
            raise EvretError(f"{where}: field 'title' is not a string")
        if doc_id in seen:
            raise EvretError(f"{where}: duplicate document id {doc_id!r} (first on line {seen[doc_id]})")
        seen[doc_id] = lineno
        yield where, doc_id, record


def read_corpus(path: str | Path) -> dict[str, dict[str, str]]:
    """A JSONL corpus as doc id -> ``{"title", "text"}`` (title ``""`` when absent), in file order.

    Errors (see :func:`iter_corpus`) name the file and line; a corpus without documents is an error too.
    """
    corpus = {doc_id: {"title": record.get("title") or "", "text": record["text"]}
              for _where, doc_id, record in iter_corpus(path)}
    if not corpus:
        raise EvretError(f"{path}: the corpus has no documents")
    return corpus
