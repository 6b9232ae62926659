"""Reading UTF-8 text, JSON and JSON Lines files, with errors that name the file and line: the one reader under
every file format of Evret (datasets, corpora, run files, question sets, results files). Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError


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


def read_document(path_or_text: str | Path, what: str = "results file",
                  text_source: str = "<json>") -> tuple[Any, str]:
    """The JSON document of a results file (a path) or of its text (a string starting with ``{``), and the name
    its errors use (the path, or ``text_source``)."""
    if isinstance(path_or_text, Path) or not str(path_or_text).lstrip().startswith("{"):
        path = Path(path_or_text)
        text, source = read_text(path, what), str(path)
    else:
        text, source = str(path_or_text), text_source
    return loads_json(text, source), source
