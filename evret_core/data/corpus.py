"""Reading JSON Lines files and document corpora, with errors that name the file and line.

One reader of the corpus format (BEIR's ``corpus.jsonl``) for the core and every plugin, so that a corpus that
loads for one retriever loads for all of them. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError

ID_FIELDS = ("_id", "doc_id", "id")
"""The fields a corpus record may carry its id in, in order of preference."""


def read_text(path: str | Path, what: str = "file") -> str:
    """The text of a UTF-8 file (a BOM dropped, any newline read as ``\\n``); ``what`` names it in errors."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise EvretError(f"{path}: no such {what}") from None
    except UnicodeDecodeError as exc:
        raise EvretError(f"{path}:{_line_of(exc)}: not UTF-8 text ({_bad_bytes(exc)}); save it as UTF-8") from None
    except IsADirectoryError:
        raise EvretError(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise EvretError(f"{path}: cannot be read ({exc.strerror})") from None


def _line_of(exc: UnicodeDecodeError) -> str:
    data = exc.object
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"{line}:{column}"


def _bad_bytes(exc: UnicodeDecodeError) -> str:
    return "byte " + " ".join(f"0x{b:02x}" for b in exc.object[exc.start : exc.end])


# a \uD800-\uDFFF escape: only these can put a lone surrogate (text that cannot be encoded) into parsed JSON
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads_json(text: str, source: str | Path, line: int | None = None) -> Any:
    """``json.loads`` whose errors are :class:`EvretError`s naming "file:line" (``line`` is the line ``text`` is on,
    for JSON Lines; else the line is found in ``text``): invalid JSON, values nested too deeply (a RecursionError
    otherwise), and strings holding a lone surrogate (``"\\ud800"``), which no UTF-8 file, hash or report holds."""

    def where(offset: int) -> str:
        return f"{source}:{line if line is not None else text.count(chr(10), 0, offset) + 1}"

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvretError(f"{where(exc.pos)}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise EvretError(f"{where(_too_deep_at(text))}: JSON nested too deeply") from None
    escape = _SURROGATE_ESCAPE.search(text)
    if escape:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise EvretError(f"{where(escape.start())}: a string holds a lone surrogate escape (such as \\ud800), "
                             "which is not text; fix the file") from None
    return value


def _too_deep_at(text: str, limit: int = 500) -> int:
    """The offset where brackets outside strings first nest ``limit`` deep (0 when they never do)."""
    depth, in_string, escaped = 0, False, False
    for offset, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth >= limit:
                return offset
        elif char in "]}":
            depth -= 1
    return 0


def iter_json_lines(path: str | Path, what: str = "file") -> Iterator[tuple[int, str, Any]]:
    """``(line number, "file:line", value)`` for each non-blank line of a JSON Lines file (lines read are reported
    to the current progress callback, :func:`evret_core.progress.current_progress`, as ``read NAME``)."""
    from evret_core.progress import current_progress

    path = Path(path)
    progress = current_progress()
    # split on "\n" only: str.splitlines() would also break at U+2028 and friends, which JSON allows inside strings
    lines = read_text(path, what).split("\n")
    stage, total = f"read {path.name}", len(lines)
    for lineno, line in enumerate(lines, start=1):
        if progress is not None and lineno % 8192 == 1:
            progress(stage, lineno - 1, total)
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        yield lineno, where, loads_json(line, path, lineno)
    if progress is not None:
        progress(stage, total, total)


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
