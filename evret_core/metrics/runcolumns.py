"""Big TREC runs as columns: a run file read into a few arrays, not one dict per query and document.

:func:`read_run` builds ``{qid: {docid: score}}``: about 200 bytes per line, so 100 million lines (a million
queries x 100) do not fit in 24 GiB. :func:`read_run_columns` reads the same file, with the same rules and the
same errors, into a :class:`ColumnarRun`: every document id in one byte buffer (a space after each, grouped by
query), the scores in one float64 array, and two offsets per query: about 20 bytes per line. It is a read-only
``Mapping[str, dict[str, float]]``, so :func:`~evret_core.metrics.evaluate_run` and the
:class:`~evret_core.Evaluator` take it as they take a dict run; a query's dict is built when it is asked for
(``evaluate_run`` and the Evaluator ask for 2,048 queries at a time), so memory stays bounded by the columns.

Reading is done in blocks of 8 MiB. A block of plain 6-field ASCII lines is split in bulk (bytes ``split``, one
``float`` per score); any other block (comments, blank lines, extra fields, non-ASCII text, a bad line) is read
line by line exactly as :func:`read_run` does, so a bad line is reported with its file and line. A query whose
lines are not adjacent (``q1 .. q2 .. q1``) is regrouped, its documents kept in file order; a document ranked
twice for a query is found after reading and reported with both lines, as :func:`read_run` reports it.

``start``/``stop`` read a byte range of the file (it must start and end at line starts; see
:mod:`evret_core.metrics.shards`), so that workers can each read their own part of one file.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from evret_core.metrics.trec import duplicate_error, line_fields, open_binary, run_fields

__all__ = ["ColumnarRun", "read_run_columns"]

_BLOCK = 1 << 23  # 8 MiB: the bulk split's temporary objects stay near 60 MiB
_BOM = b"\xef\xbb\xbf"
_KIND = np.zeros(256, dtype=np.uint8)
_KIND[list(b" \t\n\r\x0b\x0c")] = 1  # what bytes.split() splits on
_KIND[list(b"\x1c\x1d\x1e\x1f")] = 2  # what str.split() also splits on: such a block is read line by line


class ColumnarRun(Mapping[str, dict[str, float]]):
    """A TREC run as columns (see the module); ``run[qid]`` is that query's ``{doc_id: score}``, built on demand.

    ``qids`` in the order of their first line; ``offsets[i]:offsets[i + 1]`` are query ``i``'s entries in
    ``scores``, ``byte_offsets[i]:byte_offsets[i + 1]`` its document ids in ``ids`` (each followed by a space),
    in file order. ``tag`` is the run tag of the first line.
    """

    def __init__(self, qids: list[str], offsets: np.ndarray, byte_offsets: np.ndarray, ids: bytes | bytearray,
                 scores: np.ndarray, tag: str = "") -> None:
        self.qids = qids
        self.offsets = offsets
        self.byte_offsets = byte_offsets
        self.ids = ids
        self.scores = scores
        self.tag = tag
        self._index: dict[str, int] | None = None

    @property
    def index(self) -> dict[str, int]:
        """query id -> position."""
        if self._index is None:
            self._index = {q: i for i, q in enumerate(self.qids)}
        return self._index

    def __len__(self) -> int:
        return len(self.qids)

    def __iter__(self) -> Iterator[str]:
        return iter(self.qids)

    def __contains__(self, qid: object) -> bool:
        return qid in self.index

    def __getitem__(self, qid: str) -> dict[str, float]:
        return self.query(self.index[qid])

    def query(self, i: int) -> dict[str, float]:
        """Query ``i``'s ``{doc_id: score}`` (documents in file order)."""
        return dict(zip(self.doc_ids(i), self.scores[self.offsets[i] : self.offsets[i + 1]].tolist(), strict=True))

    def queries(self, positions: Sequence[int]) -> list[dict[str, float]]:
        """The dicts of the queries at ``positions`` (-1: an empty dict); a stretch of consecutive positions, the
        usual case when the dataset lists queries in the run's order, is decoded in one call."""
        out: list[dict[str, float]] = []
        i, n = 0, len(positions)
        while i < n:
            first = positions[i]
            if first < 0:
                out.append({})
                i += 1
                continue
            j = i + 1
            while j < n and positions[j] == first + (j - i):
                j += 1
            last = first + (j - i)
            ids = self.ids[self.byte_offsets[first] : self.byte_offsets[last]].decode().split()
            base = int(self.offsets[first])
            scores = self.scores[base : self.offsets[last]].tolist()
            bounds = (self.offsets[first : last + 1] - base).tolist()
            out.extend(dict(zip(ids[a:b], scores[a:b], strict=True)) for a, b in zip(bounds, bounds[1:], strict=False))
            i = j
        return out

    def doc_ids(self, i: int) -> list[str]:
        """Query ``i``'s document ids, in file order."""
        return self.ids[self.byte_offsets[i] : self.byte_offsets[i + 1]].decode().split()

    def positions(self, qids: Sequence[str]) -> np.ndarray:
        """The position of each of ``qids`` in this run (-1 where it has no lines)."""
        get = self.index.get
        return np.fromiter((get(q, -1) for q in qids), dtype=np.int64, count=len(qids))

    @property
    def nbytes(self) -> int:
        """The memory its columns take (not counting the query ids)."""
        return len(self.ids) + self.scores.nbytes + self.offsets.nbytes + self.byte_offsets.nbytes


class _Reader:
    """Collects a run file's blocks: per block the document ids (joined), scores, and runs of equal query ids."""

    def __init__(self, path: Path, start: int, stop: int | None) -> None:
        self.path = path
        self.start = start
        self.stop = stop
        self.index: dict[bytes, int] = {}
        self.ids = bytearray()
        self.scores: list[np.ndarray] = []
        self.group_qids: list[np.ndarray] = []  # per run of adjacent lines of one query: its query,
        self.group_sizes: list[np.ndarray] = []  # its number of lines,
        self.group_bytes: list[np.ndarray] = []  # and the bytes of its ids (a space after each)
        self.tag = ""
        self._first_line: int | None = None

    def first_line(self) -> int:
        """The line number of ``start`` (counted only when an error needs it)."""
        if self._first_line is None:
            count = 0
            with self.path.open("rb") as handle:
                left = self.start
                while left > 0:
                    data = handle.read(min(_BLOCK, left))
                    if not data:
                        break
                    count += data.count(b"\n")
                    left -= len(data)
            self._first_line = count + 1
        return self._first_line

    def block(self, block: bytes, lineno: int) -> None:
        """Read one block of whole lines; ``lineno``: the number of lines before it (from ``start``)."""
        if self.start == 0 and lineno == 0 and block.startswith(_BOM):
            block = block[len(_BOM):]
        tokens = plain_fields(block)
        if tokens is not None:
            texts = tokens[4::6]
            try:
                scores = np.fromiter(map(float, texts), dtype=np.float64, count=len(texts))
            except ValueError:
                scores = None
            if scores is not None and not np.isnan(scores).any():
                if not self.tag:
                    self.tag = tokens[5].decode()
                self._add(tokens[0::6], tokens[2::6], scores)
                return
        lines = block.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        self._slow(lines, lineno)

    def _slow(self, lines: list[bytes], lineno: int) -> None:
        """The block line by line, as :func:`read_run` reads it (its checks, its errors)."""
        qids: list[bytes] = []
        docs: list[bytes] = []
        scores: list[float] = []
        base = self.first_line() + lineno
        for n, raw in enumerate(lines):
            number = base + n
            fields = line_fields(raw, number, self.path)
            if fields is None:
                continue
            qid, doc, score, tag = run_fields(fields, f"{self.path}:{number}")
            if not self.tag:
                self.tag = tag
            qids.append(qid.encode())
            docs.append(doc.encode())
            scores.append(score)
        if qids:
            self._add(qids, docs, np.asarray(scores, dtype=np.float64))

    def _add(self, qids: Sequence[bytes], docs: Sequence[bytes], scores: np.ndarray) -> None:
        n = len(qids)
        # runs of adjacent lines of one query: one index lookup per run, not per line
        change = np.fromiter(map(operator.ne, qids[1:], qids[:-1]), dtype=bool, count=n - 1)
        starts = np.concatenate(([0], np.flatnonzero(change) + 1))
        index = self.index
        ids = [index.setdefault(qids[s], len(index)) for s in starts.tolist()]
        sizes = np.diff(np.append(starts, n))
        lengths = np.fromiter(map(len, docs), dtype=np.int64, count=n) + 1
        ends = np.cumsum(lengths)
        group_bytes = np.diff(np.concatenate(([0], ends[starts + sizes - 1])))
        self.ids += b" ".join(docs)
        self.ids += b" "
        self.scores.append(scores)
        self.group_qids.append(np.asarray(ids, dtype=np.int64))
        self.group_sizes.append(sizes.astype(np.int64))
        self.group_bytes.append(group_bytes.astype(np.int64))

    def finish(self) -> ColumnarRun:
        qids = [q.decode() for q in self.index]
        if not qids:
            return ColumnarRun([], np.zeros(1, np.int64), np.zeros(1, np.int64), b"", np.zeros(0), self.tag)
        gq, gn, gb = (np.concatenate(parts) for parts in (self.group_qids, self.group_sizes, self.group_bytes))
        scores = np.concatenate(self.scores) if len(self.scores) > 1 else self.scores[0]
        self.scores = []
        ids: bytes | bytearray = self.ids  # kept as it grew: a bytes copy would double the peak
        self.ids = bytearray()
        if len(gq) != len(qids):  # some query's lines are not adjacent: regroup, keeping each query's file order
            order = np.argsort(gq, kind="stable")
            entry_starts = np.cumsum(gn) - gn
            byte_starts = np.cumsum(gb) - gb
            view = memoryview(ids)
            ids = b"".join(view[s : s + b] for s, b in zip(byte_starts[order].tolist(), gb[order].tolist(),
                                                                 strict=True))
            del view
            take = np.repeat(entry_starts[order] - (np.cumsum(gn[order]) - gn[order]), gn[order])
            scores = scores[take + np.arange(len(take))]
            gn = np.bincount(gq, weights=gn, minlength=len(qids)).astype(np.int64)
            gb = np.bincount(gq, weights=gb, minlength=len(qids)).astype(np.int64)
        offsets = np.concatenate(([0], np.cumsum(gn)))
        byte_offsets = np.concatenate(([0], np.cumsum(gb)))
        return ColumnarRun(qids, offsets, byte_offsets, ids, scores, self.tag)


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


def blocks(handle: BinaryIO, start: int, stop: int | None) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines from ``start`` to ``stop`` (or the end), each with the lines before it."""
    handle.seek(start)
    left = None if stop is None else stop - start
    carry = b""
    lines = 0
    while left is None or left > 0:
        data = handle.read(_BLOCK if left is None else min(_BLOCK, left))
        if not data:
            break
        if left is not None:
            left -= len(data)
        block = carry + data
        cut = block.rfind(b"\n") + 1
        if cut == 0:  # one line longer than a block: keep reading it
            carry = block
            continue
        carry = block[cut:]
        yield block[:cut], lines
        lines += block.count(b"\n", 0, cut)
    if carry:
        yield carry, lines


def read_run_columns(path: str | Path, start: int = 0, stop: int | None = None) -> ColumnarRun:
    """Read a TREC run file (or the byte range ``start:stop`` of one) into a :class:`ColumnarRun`.

    The same file gives the same queries, documents, scores and tag as :func:`read_run`, and a bad file the same
    error (naming the file and line); see the module for how.
    """
    path = Path(path)
    handle = open_binary(path)
    reader = _Reader(path, start, stop)
    with handle:
        for block, lines in blocks(handle, start, stop):
            reader.block(block, lines)
    run = reader.finish()
    _check_duplicates(run, reader)
    return run


def _check_duplicates(run: ColumnarRun, reader: _Reader) -> None:
    """A document ranked twice for a query: the error :func:`read_run` gives (the first such line of the file)."""
    counts = np.diff(run.offsets).tolist()
    ids, ends = run.ids, run.byte_offsets.tolist()
    twice = {run.qids[i] for i, n in enumerate(counts) if len(set(bytes(ids[ends[i] : ends[i + 1]]).split())) != n}
    if not twice:
        return
    first: dict[tuple[str, str], int] = {}
    with reader.path.open("rb") as handle:
        for block, lines in blocks(handle, reader.start, reader.stop):
            base = reader.first_line() + lines
            for n, raw in enumerate(block.split(b"\n")):
                fields = line_fields(raw, base + n, reader.path) if raw.strip() else None
                if fields is None or fields[0] not in twice:
                    continue
                key = (fields[0], fields[2])
                if key in first:
                    raise duplicate_error(f"{reader.path}:{base + n}", key[0], key[1], first[key])
                first[key] = base + n
