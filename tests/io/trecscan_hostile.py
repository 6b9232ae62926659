"""Hostile input for the compiled TREC tokenizer ``evret_core.io._trecscan``, run as a script in a subprocess.

tests/io/test_trec_scan.py runs it under ``PYTHONMALLOC=debug`` (guard bytes around every allocation) and against an
AddressSanitizer build of the extension (``EVRET_TRECSCAN_SO`` names the .so to load): a read or write out of
bounds aborts the process there. Otherwise the script checks that, on every input, the compiled scan and the
numpy/Python scan (:func:`evret_core.io.trecscan.scan_python`) return the same columns bit for bit and stop
at the same bad line.

Inputs: random lines built from a biased alphabet (separators, CR, CRLF, NUL, '#', multi-byte and Unicode-space
UTF-8, broken UTF-8: truncated, overlong, surrogate, past U+10FFFF), joined lines, truncated lines, lines longer
than any buffer, blocks cut in the middle of a UTF-8 sequence, numbers at the edges of float() (huge, tiny,
denormal, 2**53 + 1, 20+ digits, '1_0', 'inf', 'nan', non-ASCII digits, hex), and calls with bad arguments.
``query_dicts`` (a ColumnarRun's dicts built from its columns) gets offsets out of range, counts that disagree,
bytes that are not UTF-8, short score buffers and int32 offsets: a ValueError, or the dicts Python builds.

Run: ``python tests/io/trecscan_hostile.py [--rounds N] [--seed S]``; prints ``ok: ...`` and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import sys
from typing import Any

from evret_core.io import trecscan

NUMBERS = [
    "1", "-0", "+0.0", "2.5", "1e400", "-1e400", "1e-400", "4.9e-324", "2.2250738585072011e-308", "9007199254740993",
    "9007199254740992", "0.1000000000000000055511151231257827", "123456789012345678901234567890", "1e22", "1e23",
    "1.7976931348623157e308", "1_0", "1__0", "inf", "-Infinity", "nan", "-nan", "NaN", "\u0661\u0662", "0x1p3", ".",
    "1.", ".5", "1e", "1e+", "e5", "--1", "1.5.2", "١٫٥", "12e-0005", "0.000000000000000000000000001", "7" * 400,
]
PIECES = [
    "q1", "q2", "d1", "d#2", "Q0", "0", "t", "#", "\u00e9", "\U0001f600", "\u00a0", "\u2003", "\u3000", "\x85", "\x1c",
    "\x1f", "\ufeff", "\u200b",
]
RAW = [b" ", b"\t", b"\n", b"\r\n", b"\r", b"\x00", b"\x0b", b"\x0c", b"\xff", b"\xc0\x80", b"\xed\xa0\x80",
       b"\xf4\x90\x80\x80", b"\xe2\x80", b"\xe2", b"\xf0\x9f\x98", b"\xc2", b"\xc2\xa0", b"\xe1\x9a\x80", b"\xe2\x81\x9f"]


def load() -> Any:
    """The extension to attack: ``EVRET_TRECSCAN_SO`` (a sanitizer build), else the installed one."""
    path = os.environ.get("EVRET_TRECSCAN_SO")
    if not path:
        if trecscan._trecscan is None:
            sys.exit("the compiled tokenizer is not built")
        return trecscan._trecscan
    spec = importlib.util.spec_from_file_location("_trecscan", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_line(rng: random.Random, nfields: int, odd: float) -> bytes:
    """A line that is mostly right: the right fields, now and then (``odd``: how often) one too many or few, odd
    bytes, odd numbers."""
    count = nfields
    if rng.random() < odd:
        count = rng.choice([0, 1, nfields - 1, nfields + 1, nfields + 5, 2 * nfields, 3 * nfields])
    fields = []
    for i in range(count):
        if i == (4 if nfields == 6 else 3) % max(count, 1):
            fields.append(rng.choice(NUMBERS).encode() if rng.random() < odd else str(rng.uniform(-1e3, 1e3)).encode())
        elif rng.random() < odd:
            fields.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3))).encode())
        else:
            fields.append(f"{rng.choice('qdt')}{rng.randint(0, 5)}".encode())
    sep = rng.choice([b" ", b"\t", b"  ", b" \t ", b"\xc2\xa0", b"\x1c", b"\xe3\x80\x80"])
    line = sep.join(fields)
    if rng.random() < odd:  # a hostile byte somewhere
        at = rng.randint(0, len(line))
        line = line[:at] + rng.choice(RAW) + line[at:]
    return line + (rng.choice([b"\r\n", b"\r", b"", b" \n"]) if rng.random() < odd else b"\n")


def random_block(rng: random.Random, nfields: int) -> bytes:
    odd = rng.choice([0.0, 0.01, 0.05, 0.3])
    data = b"".join(random_line(rng, nfields, odd) for _ in range(rng.randint(0, 60)))
    if rng.random() < 0.2 and data:  # truncated anywhere, even inside a UTF-8 sequence
        data = data[: rng.randint(0, len(data))]
    if rng.random() < 0.05:
        data += b"q1 Q0 " + b"x" * rng.randint(1000, 100_000) + b" 1 2 t\n"
    return data


def _dicts(qids: list[str], sizes: list[int], ids: list[str], values: list[float],
           keep: Any) -> tuple[dict[str, dict[str, float]], bool]:
    """The dicts the dict scan should make from a columns scan's stretches (the queries in ``keep`` only, unless it
    is None), and whether a document was met twice in a query's dict."""
    at, out, repeat = 0, {}, False
    for qid, size in zip(qids, sizes, strict=True):
        if keep is None or qid in keep:
            docs = out.setdefault(qid, {})
            before = len(docs)
            docs.update(zip(ids[at : at + size], values[at : at + size], strict=True))
            repeat = repeat or len(docs) != before + size
        at += size
    return out, repeat


def same(fast: Any, block: bytes, nfields: int, want_tag: bool) -> bool:
    """The compiled scan and the Python scan agree; True when the block had a bad line."""
    got = trecscan.Scan(*fast.scan(block, nfields, want_tag))
    expected = trecscan.scan_python(block, nfields, want_tag)
    assert got == expected, (block[:400], got, expected)
    assert got.newlines == block.count(b"\n")
    # the dict mode: each stretch's documents go into its query's dict in `into` (merged with what an earlier
    # stretch or block put there); `repeats` then also says when a merge met a document already there
    into: dict[str, dict[str, float]] = {}
    dicts = trecscan.Scan(*fast.scan(block, nfields, want_tag, into))
    assert dicts.ids is into and dicts.values == bytearray()
    ids = got.ids.decode().split()
    values = memoryview(got.values).cast("d").tolist()
    sizes = memoryview(got.group_sizes).cast("q").tolist()
    expected, merged_repeat = _dicts(got.group_qids, sizes, ids, values, None)
    assert [(q, list(d.items())) for q, d in into.items()] == [(q, list(d.items())) for q, d in expected.items()]
    assert all(type(d) is dict for d in into.values())
    assert dicts.repeats == (got.repeats or merged_repeat)
    assert dicts._replace(ids=None, values=None, repeats=None) == got._replace(ids=None, values=None, repeats=None)
    # with `keep` (a shard's qrels): every other query of the block (a dict, set or frozenset), the others' lines
    # only checked; a document repeated in a query not kept is no repeat
    keep_ids = list(dict.fromkeys(got.group_qids))[::2]
    keep = (dict.fromkeys(keep_ids, 0), set(keep_ids), frozenset(keep_ids))[len(block) % 3]
    kept: dict[str, dict[str, float]] = {}
    only = trecscan.Scan(*fast.scan(block, nfields, want_tag, kept, keep))
    wanted, kept_repeat = _dicts(got.group_qids, sizes, ids, values, keep)
    assert [(q, list(d.items())) for q, d in kept.items()] == [(q, list(d.items())) for q, d in wanted.items()]
    assert only.repeats == kept_repeat
    # fill_dicts: the columns (scanned on another thread) put into dicts on this one, as the dict scan puts them
    for keep_arg, into_expected, repeat_expected in ((None, into, dicts.repeats), (keep, kept, kept_repeat)):
        filled: dict[str, dict[str, float]] = {}
        assert fast.fill_dicts(filled, got.ids, got.values, got.group_qids, got.group_sizes, got.ids.isascii(),
                               keep_arg) == repeat_expected
        assert [(q, list(d.items())) for q, d in filled.items()] == [(q, list(d.items())) for q, d in
                                                                     into_expected.items()]
    assert only._replace(ids=None, values=None, repeats=None) == got._replace(ids=None, values=None, repeats=None)
    if got.error is None and block.count(b"\n") > 1:  # two calls on two halves, into one dict: as one call
        cut = block.index(b"\n", len(block) // 2) + 1
        halves: dict[str, dict[str, float]] = {}
        first = trecscan.Scan(*fast.scan(block[:cut], nfields, want_tag, halves))
        second = trecscan.Scan(*fast.scan(block[cut:], nfields, want_tag, halves))
        assert [(q, list(d.items())) for q, d in halves.items()] == [(q, list(d.items())) for q, d in into.items()]
        assert (first.repeats or second.repeats) == dicts.repeats
    return got.error is not None


EDGE_LINES = [
    b"q1 Q0 d1 1 2.5 t\n", b"q1 Q0 doc-with-a-rather-long-id-0123456789 2 1.25 run\n", b"q2\tQ0\td1\t1\t-3\tt\r\n",
    b"q2 Q0 d\xc3\xa9 2 1 t\n", b"\n", b"   \n", b"# a comment line\n", b"q3  Q0   d1 1 7 t  \n",
    b"q3 Q0 d2 2 1e3 t\x0b\n", b"q3\x1cQ0\x1fd3 3 0.5 t\n", b"q4 Q0 d\x01x 1 2 t\n",
]


def edges(fast: Any) -> int:
    """The bit-mask lexer reads 64 bytes at a time: lines that end at every offset of a 64-byte chunk, blocks cut at
    every length (a field, a UTF-8 character or a CRLF cut in two), joined lines, trailing fields and CR-only line
    ends starting at every offset, an odd byte (non-ASCII, NUL) at every offset and a bad line after an odd one,
    scanned alike by both paths."""
    blocks = 0
    text = b"".join(EDGE_LINES * 3)
    for nfields, body in ((6, text), (4, b"q1 0 d1 1\nq1 0 d\xc3\xa92 2\r\nq2 0 d1 0\n\nq2  0 d3 3 \n" * 4)):
        for cut in range(len(body) + 1):  # every prefix: truncated lines, a last line without '\n'
            same(fast, body[:cut], nfields, True)
            blocks += 1
        for start in range(0, 130):  # every suffix near the front: the chunks fall elsewhere in the lines
            same(fast, body[start:], nfields, True)
            blocks += 1
    for pad in range(70):  # a joined line (12 fields), trailing fields (7-11) and a CR-only pair at every offset
        head = b"q0 Q0 " + b"x" * pad + b" 1 1 t\n"
        for tail in (b"q5 Q0 d1 1 2 t q5 Q0 d2 2 1 t\n", b"q5 Q0 d1 1 2 t a b c d e\n", b"q5 Q0 d1 1 2 t\rq5 Q0 d2 2 1 t\r"):
            same(fast, head + tail + b"q6 Q0 d1 1 1 t\n", 6, True)
            blocks += 1
    base = b"".join(EDGE_LINES[:2]) * 6
    for at in range(len(base)):  # one odd byte at every offset
        for odd in (b"\x00", b"\xff", b"\xc2\xa0", b"\xe3\x80"):
            same(fast, base[:at] + odd + base[at:], 6, True)
            blocks += 1
    return blocks


class _Keys(dict):  # type: ignore[type-arg]
    """A dict subclass: its own __contains__ is not what the scan would call, so the scan refuses it as `keep`."""

    def __contains__(self, key: object) -> bool:
        return True


def bad_calls(fast: Any) -> int:
    calls = 0
    for args in [(), (b"",), (b"", 6), (b"", 5, True), (b"", 6, True, 1, 2), ("text", 6, True), (None, 6, True),
                 (b"q1 Q0 d 1 2 t\n", 6, True, True), (b"q1 Q0 d 1 2 t\n", 6, True, []),
                 (b"q1 Q0 d 1 2 t\n", 6, True, {"q1": 5}), (b"q1 0 d 1\n", 4, True, {"q1": [1]}),
                 (memoryview(bytearray(b"q1 Q0 d 1 2 t\n" * 4))[::2], 6, True),
                 (b"q1 0 d 1\n", 4, True, None, {"q1"}), (b"q1 0 d 1\n", 4, True, {}, ["q1"]),
                 (b"q1 0 d 1\n", 4, True, {}, _Keys(q1=0)), (b"q1 0 d 1\n", 4, True, {}, {}, 1)]:
        calls += 1
        try:
            fast.scan(*args)
        except (TypeError, ValueError, BufferError):
            continue
        raise AssertionError(f"scan{args!r} was accepted")
    return calls


def dict_cases(fast: Any, rng: random.Random, rounds: int) -> int:
    """``query_dicts`` on columns with corrupted offsets, counts, ids and buffer types: a ValueError/TypeError, or
    the dicts the Python path builds from the same columns."""
    import numpy as np

    calls = 0
    for _ in range(rounds):
        n = rng.randint(0, 6)
        docs = [[f"d{rng.randint(0, 9)}{rng.choice(['', 'é', '#'])}" for _ in range(rng.randint(0, 5))] for _ in range(n)]
        ids = bytearray(b"".join(b"".join(d.encode() + b" " for d in q) for q in docs))
        counts = [len(q) for q in docs]
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        byte_offsets = np.concatenate(([0], np.cumsum([sum(len(d.encode()) + 1 for d in q) for q in docs])))
        byte_offsets = byte_offsets.astype(np.int64)
        scores = np.arange(int(offsets[-1]), dtype=np.float64)
        first, last = sorted(rng.randint(0, n) for _ in range(2))
        kind = rng.randrange(8)
        if kind == 1 and n:
            offsets[rng.randint(0, n)] += rng.choice([-3, -1, 1, 2**40])
        elif kind == 2 and n:
            byte_offsets[rng.randint(0, n)] += rng.choice([-3, -1, 1, 2**40, -(2**62)])
        elif kind == 3 and ids:
            ids[rng.randrange(len(ids))] = rng.choice([0xff, 0x20, 0xc3, 0x00])
        elif kind == 4:
            first, last = rng.choice([(-1, 0), (0, n + 1), (n, n - 1), (0, 2**40)])
        elif kind == 5:
            scores = scores[:-1] if len(scores) else scores
        elif kind == 6:
            offsets = offsets.astype(np.int32)
        args = (bytes(ids), byte_offsets, offsets, scores, first, last)
        calls += 1
        try:
            got = fast.query_dicts(*args)
        except (ValueError, TypeError, BufferError):
            assert kind, "clean columns refused"
            continue
        if kind in (0, 5) or (kind == 4 and 0 <= first <= last <= n):
            expected = [dict(zip(docs[q], scores[offsets[q] : offsets[q + 1]].tolist(), strict=True))
                        for q in range(first, last)]
            assert got == expected, (got, expected)
        assert isinstance(got, list) and all(type(d) is dict for d in got)
    return calls


def fill_cases(fast: Any, rng: random.Random, rounds: int) -> int:
    """``fill_dicts`` on a block's columns with corrupted counts, ids, values, query ids and arguments: a
    ValueError/TypeError, never a read outside the buffers (the address sanitizer build runs this too)."""
    import struct

    calls = 0
    for _ in range(rounds):
        nfields = rng.choice([4, 6])
        got = trecscan.Scan(*fast.scan(random_block(rng, nfields), nfields, True))
        ids, values, qids, sizes = bytearray(got.ids), bytearray(got.values), list(got.group_qids), bytearray(got.group_sizes)
        into: Any = {}
        keep: Any = None
        kind = rng.randrange(9)
        if kind == 1 and sizes:
            at = rng.randrange(len(sizes) // 8)
            sizes[8 * at : 8 * at + 8] = struct.pack("q", rng.choice([-1, 1 << 62, 0, 3]))
        elif kind == 2 and ids:
            del ids[rng.randrange(len(ids)):]
        elif kind == 3:
            values += b"\0" * rng.choice([1, 8])
        elif kind == 4 and qids:
            qids[rng.randrange(len(qids))] = rng.choice([1, b"q1", None])
        elif kind == 5:
            qids.append("extra")
        elif kind == 6 and qids:
            into = {qids[0]: rng.choice([[], 1.0, "x"])}
        elif kind == 7:
            keep = rng.choice([["q1"], "q1", 5])
        elif kind == 8 and ids:
            ids[rng.randrange(len(ids))] = 0x20  # an id split in two: one id more than values
        calls += 1
        try:
            fast.fill_dicts(into, ids, values, qids, sizes, bytes(ids).isascii(), keep)
        except (ValueError, TypeError, UnicodeDecodeError):
            continue
        assert kind in (0, 1, 2, 4, 6, 8) or not got.group_qids, kind  # (some corruptions leave it valid)
        assert all(type(d) is dict for d in into.values())
    return calls


def side_by_side(fast: Any, rng: random.Random, count: int) -> int:
    """The columns scan releases the GIL: blocks (some of them long, with numbers only Python's readers read, which
    take the GIL back for a moment) scanned on 4 threads at once give what they give one after another."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = []
    for n in range(count):
        nfields = rng.choice([4, 6])
        block = b"".join(random_block(rng, nfields) for _ in range(1 + 40 * (n % 5 == 0)))
        jobs.append((block, nfields))
    alone = [fast.scan(block, nfields, True) for block, nfields in jobs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda job: fast.scan(job[0], job[1], True), jobs * 3))
    assert together == alone * 3
    return len(jobs) * 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.pop("EVRET_PURE_PYTHON", None)
    fast = load()
    rng = random.Random(args.seed)
    bad = 0
    for number in NUMBERS:
        for nfields, line in ((6, f"q1 Q0 d1 1 {number} t\n"), (4, f"q1 0 d1 {number}\n")):
            bad += same(fast, line.encode(), nfields, True)
    for _ in range(args.rounds):
        nfields = rng.choice([4, 6])
        bad += same(fast, random_block(rng, nfields), nfields, rng.random() < 0.8)
    threaded = side_by_side(fast, rng, max(args.rounds // 10, 20))
    fills = fill_cases(fast, rng, args.rounds)
    edge_blocks = edges(fast)
    calls = bad_calls(fast)
    dicts = dict_cases(fast, rng, args.rounds)
    print(f"ok: {args.rounds + 2 * len(NUMBERS)} blocks scanned alike ({bad} stopped at a bad line), {edge_blocks} "
          f"blocks at the lexer's chunk edges, {calls} bad calls "
          f"refused, {dicts} query_dicts calls, {fills} fill_dicts calls, {threaded} blocks scanned on 4 threads at "
          "once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
