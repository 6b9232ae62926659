"""One block of TREC run or qrels lines as columns: the tokenizer under every TREC reader of Evret.

:func:`scan` reads a block of whole lines once and returns a :class:`Scan`: each result line's document id (in
one byte buffer, a space after each), its score or grade (float64), the stretches of adjacent lines of one query,
the run tag of the first result line, whether a stretch lists a document twice, and the first bad line (the scan
stops there). It only finds a bad line; the message is always the Python reader's
(:func:`check_line` on that one line), so every path gives the same words.

Where the optional compiled tokenizer ``evret_core.io._trecscan`` was built it does the scan (memchr for line
ends, a byte table for whitespace, UTF-8 checked as it goes, plain decimals read without float()); else, or with
``EVRET_PURE_PYTHON=1``, a numpy path does: a block of plain ASCII lines with exactly the right number of fields is
split in one call, any other block is read line by line. Both give the same columns, bit for bit, and stop at the
same line (tests/io/test_trec_scan.py).
"""

from __future__ import annotations

import math
import operator
import os
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np

from evret_core.contracts.errors import EvretError

try:
    from evret_core.io import _trecscan  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the numpy path
    _trecscan = None

__all__ = ["Scan", "scan", "compiled", "TrecRun", "check_line", "line_fields", "open_binary", "duplicate_error"]


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


def line_fields(raw: bytes, lineno: int, path: Path | str) -> list[str] | None:
    """One line's whitespace-separated fields, or None for a blank or comment line; bad UTF-8 or a NUL byte is an
    error naming the file, line and column (a byte-order mark is dropped from line 1)."""
    try:
        line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        bad = " ".join(f"0x{b:02x}" for b in raw[exc.start : exc.end])
        raise EvretError(f"{path}:{lineno}: not UTF-8 text (byte {bad} at column {exc.start + 1})") from None
    if "\0" in line:
        raise EvretError(f"{path}:{lineno}: a NUL byte at column {line.index(chr(0)) + 1} (a binary or UTF-16 file?)")
    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return None
    return fields


_LAYOUT = {6: "query_id Q0 doc_id rank score run_tag", 4: "query_id iteration doc_id grade"}


def check_line(raw: bytes, lineno: int, path: Path | str, nfields: int) -> list[str] | None:
    """A run (``nfields=6``) or qrels (4) line's fields, None for a blank or comment line, or the error naming
    ``path:lineno``: not UTF-8, a NUL byte, too few fields (qrels: not 4), a score or grade not a number or NaN, or
    twice the fields or more (two lines joined: a run line's 7th to 11th fields are ignored, as trec_eval does)."""
    fields = line_fields(raw, lineno, path)
    if fields is None:
        return None
    where = f"{path}:{lineno}"
    count = len(fields)
    if count < nfields or count >= 2 * nfields or (nfields == 4 and count != 4):
        why = f"expected {nfields} fields ({_LAYOUT[nfields]}), got {count}"
        if count >= 2 * nfields:
            why += (": lines that end in a carriage return alone (old Mac line ends) read as one; convert them to \\n"
                    if b"\r" in raw.rstrip(b"\r\n") else ": two or more lines joined (a lost line end?)")
        raise EvretError(f"{where}: {why}")
    _number(fields[4 if nfields == 6 else 3], "score" if nfields == 6 else "grade", where)
    return fields


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

_KIND = np.zeros(256, dtype=np.uint8)
_KIND[list(b" \t\n\r\x0b\x0c")] = 1  # what bytes.split() splits on
_KIND[list(b"\x1c\x1d\x1e\x1f\x00")] = 2  # what str.split() also splits on, and NUL: such a block is read line by line


class Scan(NamedTuple):
    """A block's columns (see the module); ``error``: (line index in the block, start, end) of its first bad line."""

    ids: bytearray
    values: bytearray
    group_qids: list[str]
    group_sizes: bytearray
    group_bytes: bytearray
    tag: str | None
    repeats: bool
    error: tuple[int, int, int] | None
    newlines: int


def compiled() -> Any:
    """The compiled tokenizer, or None when it was not built or ``EVRET_PURE_PYTHON`` is set (not "" or "0")."""
    if os.environ.get("EVRET_PURE_PYTHON", "") not in ("", "0"):
        return None
    return _trecscan


def scan(block: bytes | memoryview, nfields: int, want_tag: bool = True) -> Scan:
    """Columns of ``block`` (whole lines of a run, ``nfields=6``, or of qrels, ``nfields=4``)."""
    fast = compiled()
    if fast is not None:
        return Scan(*fast.scan(block, nfields, want_tag))
    return scan_python(block, nfields, want_tag)


def scan_python(block: bytes | memoryview, nfields: int, want_tag: bool = True) -> Scan:
    """:func:`scan` in numpy and Python (the path without the compiled tokenizer)."""
    block = bytes(block)
    value_at = 4 if nfields == 6 else 3
    tokens = plain_fields(block, nfields)
    if tokens is not None:
        texts = tokens[value_at::nfields]
        try:
            values = np.fromiter(map(float, texts), dtype=np.float64, count=len(texts))
        except ValueError:
            values = None
        if values is not None and not np.isnan(values).any():
            tag = tokens[5].decode() if want_tag and nfields == 6 and tokens else None
            return _columns(tokens[0::nfields], tokens[2::nfields], values, tag, None, block.count(b"\n"))
    qids: list[bytes] = []
    docs: list[bytes] = []
    numbers: list[float] = []
    tag = None
    error = None
    at = 0
    for index, raw in enumerate(block.split(b"\n")):
        start, at = at, at + len(raw) + 1
        if not raw and at > len(block):
            break  # the empty piece after the last '\n'
        try:
            fields = check_line(raw, 0, "", nfields)
        except EvretError:
            error = (index, start, start + len(raw))
            break
        if fields is None:
            continue
        if tag is None and want_tag and nfields == 6:
            tag = fields[5]
        qids.append(fields[0].encode())
        docs.append(fields[2].encode())
        numbers.append(float(fields[value_at]))
    return _columns(qids, docs, np.asarray(numbers, dtype=np.float64), tag, error, block.count(b"\n"))


def _columns(qids: list[bytes], docs: list[bytes], values: np.ndarray, tag: str | None,
             error: tuple[int, int, int] | None, newlines: int) -> Scan:
    n = len(qids)
    if not n:
        return Scan(bytearray(), bytearray(), [], bytearray(), bytearray(), tag, False, error, newlines)
    change = np.fromiter(map(operator.ne, qids[1:], qids[:-1]), dtype=bool, count=n - 1)
    starts = np.concatenate(([0], np.flatnonzero(change) + 1))
    sizes = np.diff(np.append(starts, n))
    lengths = np.fromiter(map(len, docs), dtype=np.int64, count=n) + 1
    ends = np.cumsum(lengths)
    group_bytes = np.diff(np.concatenate(([0], ends[starts + sizes - 1])))
    bounds = np.append(starts, n).tolist()
    repeats = any(len(set(docs[a:b])) != b - a for a, b in zip(bounds, bounds[1:], strict=False))
    ids = bytearray(b" ".join(docs))
    ids += b" "
    return Scan(ids, bytearray(values.astype(np.float64).tobytes()), [qids[s].decode() for s in starts.tolist()],
                bytearray(sizes.astype(np.int64).tobytes()), bytearray(group_bytes.astype(np.int64).tobytes()), tag,
                repeats, error, newlines)


def plain_fields(block: bytes, n: int = 6) -> list[bytes] | None:
    """The block's fields, when every line is plain ASCII with exactly ``n`` fields and none is a comment (the
    bulk case); else None (the block is then read line by line). Checked with numpy on the bytes, split in one call."""
    if not block.isascii():
        return None
    data = np.frombuffer(block, dtype=np.uint8)
    kind = _KIND[data]
    if (kind == 2).any():
        return None
    space = kind == 1
    starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
    ends = np.flatnonzero(data == 10)
    if not block.endswith(b"\n"):
        ends = np.append(ends, len(block))
    if len(starts) != n * len(ends) or data[starts[::n]].__eq__(ord("#")).any():
        return None
    # as many starts as n per line: each line has exactly n when its first start comes after the line before it
    # ends and its n-th start before it ends
    if not ((starts[::n][1:] > ends[:-1]).all() and (starts[n - 1 :: n] < ends).all()):
        return None
    return block.split()
