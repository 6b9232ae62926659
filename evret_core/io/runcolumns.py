"""Big TREC runs as columns: a run file read into a few arrays, not one dict per query and document.

:func:`read_run` builds ``{qid: {docid: score}}``: about 200 bytes per line, so 100 million lines (a million
queries x 100) do not fit in 24 GiB. :func:`read_run_columns` reads the same file, with the same rules and the
same errors, into a :class:`ColumnarRun`: every document id in one byte buffer (a space after each, grouped by
query), the scores in one float64 array, and two offsets per query: about 20 bytes per line. It is a read-only
``Mapping[str, dict[str, float]]``, so :func:`~evret_core.metrics.evaluate_run` and the
:class:`~evret_core.Evaluator` take it as they take a dict run; a query's dict is built when it is asked for
(``evaluate_run`` and the Evaluator ask for 2,048 queries at a time), so memory stays bounded by the columns.

Reading is done in blocks of 8 MiB, each read once by :func:`~evret_core.io.trecscan.scan` (compiled where
it was built) into the ids, scores and stretches of adjacent lines of one query; the first bad line stops the read
and is reported with its file and line, in the words of :func:`read_run`. A query whose lines are not adjacent
(``q1 .. q2 .. q1``) is regrouped, its documents kept in file order; a document ranked twice for a query (the scan
flags it) is then looked for line by line and reported with both lines, as :func:`read_run` reports it.

``start``/``stop`` read a byte range of the file (it must start and end at line starts; see
:mod:`evret_core.metrics.shards`), so that workers can each read their own part of one file.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.io.trecscan import (
    Scan,
    TrecRun,
    check_line,
    compiled,
    duplicate_error,
    line_fields,
    open_binary,
    scan,
)

__all__ = ["ColumnarRun", "read_run_columns"]

_BLOCK = 1 << 23  # 8 MiB: the bulk split's temporary objects stay near 60 MiB
_BOM = b"\xef\xbb\xbf"


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
        fast = compiled()
        arrays = (self.offsets, self.byte_offsets, self.scores)
        if fast is not None and not all(a.flags.c_contiguous and a.dtype == t
                                        for a, t in zip(arrays, (np.int64, np.int64, np.float64), strict=True)):
            fast = None
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
            if fast is not None:  # the dicts built in C from the columns: no list of every id first
                out.extend(fast.query_dicts(self.ids, self.byte_offsets, self.offsets, self.scores, first, last))
                i = j
                continue
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
    """Reads a file's blocks with :func:`~evret_core.io.trecscan.scan` and keeps their columns: the document
    ids (joined), the scores or grades, and per stretch of adjacent lines of one query its query, number of lines and
    bytes of ids; it stops at the first bad line, which :meth:`raise_error` reports."""

    def __init__(self, path: Path, start: int, stop: int | None, nfields: int,
                 into: dict[str, dict[str, float]] | None = None, keep: Container[str] | None = None) -> None:
        self.path = path
        self.run = into  # the compiled scan's dicts, each query's lines merged into one
        self.keep = keep  # with into: the queries put into it (the others' lines are only checked)
        self.start = start
        self.stop = stop
        self.nfields = nfields
        self.index: dict[str, int] = {}
        self.ids = bytearray()
        self.values = bytearray()
        self.group_qids: list[int] = []
        self.group_sizes: list[np.ndarray] = []
        self.group_bytes: list[np.ndarray] = []
        self.tag = ""
        self.repeats = False
        self.merged: set[int] = set()
        self.lines = 0  # the lines of the blocks read  # queries whose lines went on from one block into the next
        self.bad: tuple[int, bytes] | None = None  # the first bad line: its number and bytes
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

    def block(self, block: memoryview, got: Scan | None = None) -> bool:
        """Read the next block of whole lines (``got``: its scan, made by another thread, of ``payload(block,
        first)``); False at a bad line."""
        lineno = self.lines
        data = payload(block, self.start == 0 and lineno == 0)
        bom = len(data) != len(block)
        if got is None:
            got = Scan(*compiled().scan(data, self.nfields, not self.tag, self.run, self.keep)) \
                if self.run is not None else scan(data, self.nfields, not self.tag)
        elif self.run is not None:  # a columns scan made on another thread: into the dicts here, as scan puts them
            repeated = compiled().fill_dicts(self.run, got.ids, got.values, got.group_qids, got.group_sizes,
                                             got.ids.isascii(), self.keep)
            got = got._replace(repeats=repeated)  # (a repeat in a query not kept is none)
        if got.tag and not self.tag:
            self.tag = got.tag
        self.repeats = self.repeats or got.repeats  # dicts: also a document met again in a query's later lines
        self.lines += got.newlines
        if self.run is None and got.group_qids:  # (dicts: the scan put the lines into self.run, merged per query)
            index = self.index
            ids = [index.setdefault(q, len(index)) for q in got.group_qids]
            sizes = np.frombuffer(got.group_sizes, dtype=np.int64)
            nbytes = np.frombuffer(got.group_bytes, dtype=np.int64)
            if self.group_qids and ids[0] == self.group_qids[-1]:  # the last query goes on in this block
                self.merged.add(ids[0])
                self.group_sizes[-1] = self.group_sizes[-1].copy()
                self.group_sizes[-1][-1] += sizes[0]
                self.group_bytes[-1] = self.group_bytes[-1].copy()
                self.group_bytes[-1][-1] += nbytes[0]
                ids, sizes, nbytes = ids[1:], sizes[1:], nbytes[1:]
            if ids:
                self.group_qids += ids
                self.group_sizes.append(sizes)
                self.group_bytes.append(nbytes)
            self.ids += got.ids
            self.values += got.values
        if got.error is None:
            return True
        line, begin, end = got.error
        shift = len(_BOM) if bom else 0
        self.bad = (self.first_line() + lineno + line, bytes(block[begin + shift if begin else 0 : end + shift]))
        return False

    def raise_error(self) -> None:
        """The error of the first bad line, if there was one (the Python reader's message for that line)."""
        if self.bad is None:
            return
        number, raw = self.bad
        check_line(raw, number, self.path, self.nfields)
        raise RuntimeError(f"{self.path}:{number}: the tokenizer refused a line the Python reader accepts: {raw!r}")

    def raise_repeat(self, keep: Callable[[str], bool], judged: bool = False) -> None:
        """The error for the first line (before any bad line) that repeats a document of its query, among the
        queries ``keep`` accepts (the file is read again, line by line, only for this)."""
        first: dict[tuple[str, str], int] = {}
        limit = self.bad[0] if self.bad else None
        with self.path.open("rb") as handle:
            for block, lines in blocks(handle, self.start, self.stop):
                base = self.first_line() + lines
                for n, raw in enumerate(block.split(b"\n")):
                    if limit is not None and base + n >= limit:
                        return
                    fields = line_fields(raw, base + n, self.path) if raw.strip() else None
                    if fields is None or not keep(fields[0]):
                        continue
                    key = (fields[0], fields[2])
                    where = f"{self.path}:{base + n}"
                    if key in first:
                        if judged:
                            raise EvretError(f"{where}: query {key[0]}: document {key[1]!r} is judged twice")
                        raise duplicate_error(where, key[0], key[1], first[key])
                    first[key] = base + n

    def finish(self) -> ColumnarRun:
        qids = list(self.index)
        scores = np.frombuffer(self.values, dtype=np.float64)
        if not qids:
            return ColumnarRun([], np.zeros(1, np.int64), np.zeros(1, np.int64), b"", np.zeros(0), self.tag)
        gq = np.asarray(self.group_qids, dtype=np.int64)
        gn, gb = (np.concatenate(parts) for parts in (self.group_sizes, self.group_bytes))
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


def payload(block: memoryview, first: bool) -> memoryview:
    """What is scanned of a block: all of it, less a UTF-8 byte-order mark at the start of the file."""
    return block[len(_BOM):] if first and block[: len(_BOM)] == _BOM else block


def _buffer_size(handle: BinaryIO, start: int, left: int | None) -> int:
    """A block's buffer: a file or range smaller than a block gets one of its size (a byte more, to see its end in
    one read)."""
    try:
        left_in_file = max(os.fstat(handle.fileno()).st_size - start, 0)
    except (OSError, AttributeError, io.UnsupportedOperation):
        left_in_file = _BLOCK
    return max(1, min(_BLOCK, left_in_file + 1, _BLOCK if left is None else left + 1))


def views(handle: BinaryIO, start: int, stop: int | None, count: int = 1) -> Iterator[memoryview]:
    """Blocks of whole lines from ``start`` to ``stop`` (or the end) as views of ``count`` reused buffers in turn,
    read with ``readinto`` (no copy of a block but the tail of its last line, which goes to the front of the next
    buffer). A view stays valid until ``count`` more have been asked for: with one buffer, until the next; with
    more, other threads can scan the blocks before it meanwhile."""
    handle.seek(start)
    readinto = cast(io.BufferedReader, handle).readinto
    left = None if stop is None else stop - start
    ring = [bytearray(_buffer_size(handle, start, left)) for _ in range(count)]
    k, have = 0, 0  # have: the bytes of an unfinished line at the front of ring[k]
    while True:
        buf = ring[k]
        want = len(buf) - have if left is None else min(len(buf) - have, left)
        n = readinto(memoryview(buf)[have : have + want]) if want > 0 else 0
        if left is not None:
            left -= n
        end = have + n
        if n == 0:
            if have:
                yield memoryview(buf)[:have]
            return
        cut = buf.rfind(b"\n", 0, end) + 1
        if cut == 0:  # one line longer than the buffer: a larger one (a new object; nothing views this one)
            if end == len(buf):
                ring[k] = buf + bytearray(len(buf))
            have = end
            continue
        yield memoryview(buf)[:cut]
        k = (k + 1) % count
        if end - cut > len(ring[k]):
            ring[k] = bytearray(end - cut + _BLOCK)
        ring[k][: end - cut] = buf[cut:end]  # the same length: no resize (that buffer's last view is done with)
        have = end - cut


def scan_threads(start: int, stop: int | None, size: int) -> int:
    """How many threads read a byte range of a file of ``size`` bytes: one for three blocks or fewer, else as many
    CPUs as this process may use, at most 4 (past that the merge of the blocks, on one thread, is what waits)."""
    if ((size if stop is None else min(stop, size)) - start) <= 3 * _BLOCK:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def pick_threads(path: str | Path, start: int, stop: int | None, threads: int | None) -> int:
    """``threads`` checked (a positive integer), or :func:`scan_threads`'s pick for the file when it is None."""
    if threads is None:
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0  # (the reader names the missing file)
        return scan_threads(start, stop, size)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise EvretError(f"threads must be a positive integer, got {threads!r}")
    return threads


def read_columns(path: str | Path, nfields: int, start: int = 0, stop: int | None = None,
                 into: dict[str, dict[str, float]] | None = None,
                 keep: dict[str, Any] | set[str] | frozenset[str] | None = None, threads: int = 1) -> _Reader:
    """A run (``nfields=6``) or qrels (4) file, or its byte range ``start:stop``, read into columns up to its first
    bad line (see :class:`_Reader`; the caller raises its errors); ``into`` (compiled scan only): into that dict
    of ``{query_id: {doc_id: value}}`` instead (the reader's ``run``), no columns in between; ``keep`` (with
    ``into``; an exact dict, set or frozenset): only these queries go into it, every line is still checked;
    ``threads`` (compiled scan): blocks scanned into columns on that many threads at once (the scan releases the
    GIL), merged in file order on this one (with ``into``: put into the dicts, while the next blocks are
    scanned)."""
    path = Path(path)
    handle = open_binary(path)
    reader = _Reader(path, start, stop, nfields, into, keep)
    with handle:
        if threads > 1 and compiled() is not None:
            _scan_on_threads(reader, handle, threads)
        else:
            for block in views(handle, start, stop):
                if not reader.block(block):
                    break
    return reader


def _scan_on_threads(reader: _Reader, handle: BinaryIO, threads: int) -> None:
    """The blocks of ``reader``'s range scanned by ``threads`` threads, up to ``threads + 1`` blocks ahead of the
    merge (so that the merge does not wait for a block just handed out)."""
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    fast = compiled()
    pending: deque[tuple[memoryview, Future[Any]]] = deque()

    def merge_oldest() -> bool:
        done, got = pending.popleft()
        return reader.block(done, Scan(*got.result()))

    with ThreadPoolExecutor(threads, thread_name_prefix="evret-trecscan") as pool:
        try:
            for n, block in enumerate(views(handle, reader.start, reader.stop, threads + 2)):
                data = payload(block, reader.start == 0 and n == 0)
                pending.append((block, pool.submit(fast.scan, data, reader.nfields, True)))
                # (the buffer the next block goes into held one merged already)
                if len(pending) == threads + 1 and not merge_oldest():
                    return
            while pending:
                if not merge_oldest():
                    return
        finally:
            for _, got in pending:  # after a bad line: the scans of the blocks after it are not wanted
                got.cancel()


def read_run_columns(path: str | Path, start: int = 0, stop: int | None = None,
                     threads: int | None = None) -> ColumnarRun:
    """Read a TREC run file (or the byte range ``start:stop`` of one) into a :class:`ColumnarRun`.

    The same file gives the same queries, documents, scores and tag as :func:`read_run`, and a bad file the same
    error naming the file and line: the first of the file, be it a bad line or a document ranked twice.
    ``threads``: how many threads scan its blocks (the compiled scan runs without the GIL); by default one for a
    file of three blocks (24 MiB) or less, else one per CPU this process may use, at most 4. Shard workers,
    which already run side by side, read with one.
    """
    reader = read_columns(path, 6, start, stop, threads=pick_threads(path, start, stop, threads))
    # the scan sees repeats within a stretch of one block; the queries whose lines are in two places (not adjacent,
    # or on both sides of a block's end) have their ids checked here
    suspects = set(reader.merged)
    if len(reader.group_qids) != len(reader.index):
        suspects.update(np.flatnonzero(np.bincount(reader.group_qids) > 1).tolist())
    run = reader.finish()
    if reader.repeats or suspects:
        counts = np.diff(run.offsets).tolist()
        ids, ends = run.ids, run.byte_offsets.tolist()
        twice = {run.qids[i] for i in (range(len(counts)) if reader.repeats else sorted(suspects))
                 if len(set(bytes(ids[ends[i] : ends[i + 1]]).split())) != counts[i]}
        if twice:
            reader.raise_repeat(twice.__contains__)
    reader.raise_error()
    return run


def read_run_dicts(path: str | Path, threads: int | None = None) -> TrecRun:
    """:func:`~evret_core.io.trec.read_run`: the compiled scan builds the dicts as it reads (no columns in
    between; on ``threads`` threads, by default as :func:`read_run_columns` picks them, the blocks are scanned into
    columns side by side and put into the dicts on this one); without it, the columns' dicts."""
    threads = pick_threads(path, 0, None, threads)  # (checked on both paths; the numpy path reads on one)
    if compiled() is None:
        columns = read_run_columns(path)
        run = TrecRun(zip(columns.qids, columns.queries(range(len(columns))), strict=True))
        run.tag = columns.tag
        return run
    run = TrecRun()
    reader = read_columns(path, 6, into=run, threads=threads)
    if reader.repeats:
        reader.raise_repeat(lambda qid: True)
    reader.raise_error()
    run.tag = reader.tag
    return run
