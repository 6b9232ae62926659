"""Hostile inputs for the compiled reader ``evret_core.metrics._fastrank``, run as a script in a subprocess.

tests/metrics/test_fastrank_hostile.py runs it under ``PYTHONMALLOC=debug`` (guard bytes around every allocation) and
against an AddressSanitizer build of the extension (``EVRET_FASTRANK_SO`` names the .so to load). A write out of
bounds aborts the process there; otherwise this script checks that every call either declines (None) or returns
buffers of exactly the sizes its input implies, and that ``evaluate_run``/``evaluate_rankings`` give the same
outcome (values, or error type and message) on the compiled and the numpy path.

Inputs: keys whose ``__eq__``/``__hash__`` mutate the dicts while the queries are looked up, values with
``__float__``, dict, str and float subclasses, bools, numpy scalars, huge ints, NaN and infinities, empty and
ragged queries, duplicates, the same dict shared between queries and between run and qrels.

``resample_sums`` (the bootstrap's sums, run without the GIL) gets wrong dtypes, byte orders, shapes and
strides, read-only and too-small outputs, indexes out of range (negative, n, huge, in the last row only), and an
index array another thread keeps writing bad values into while the kernel runs: each call raises TypeError or
ValueError, or writes exactly what numpy's counts give.

Run: ``python tests/metrics/fastrank_hostile.py [--rounds N] [--seed S]``; prints ``ok: ...`` and exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from evret_core.metrics import engine

METRICS = ["ndcg@5", "ap", "mrr", "recall@10", "bpref", "num_ret", "num_rel_ret", "r_precision"]


def load_reader() -> Any:
    """The extension to attack: ``EVRET_FASTRANK_SO`` (a sanitizer build), else the installed one."""
    path = os.environ.get("EVRET_FASTRANK_SO")
    if not path:
        if engine._fastrank is None:
            sys.exit("the compiled reader is not built")
        return engine._fastrank
    spec = importlib.util.spec_from_file_location("_fastrank", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- hostile objects ----------------------------------------------------------------------------------------------
class Grower:
    """A key whose hash collides with ``target`` and whose ``__eq__`` grows ``victims`` every time it is asked."""

    def __init__(self, target: str, victims: list[dict[str, Any]], value: Any = 1.0) -> None:
        self.target, self.victims, self.value, self.calls = target, victims, value, 0

    def __hash__(self) -> int:
        return hash(self.target)

    def __eq__(self, other: object) -> bool:
        self.calls += 1
        for victim in self.victims:
            for i in range(64):
                victim[f"grown{self.calls}-{i}"] = self.value
        return False


class Clearer(Grower):
    """Empties its victims (the buffers sized before would be too large, never too small)."""

    def __eq__(self, other: object) -> bool:
        self.calls += 1
        for victim in self.victims:
            victim.clear()
        return False

    __hash__ = Grower.__hash__


class HashMutator:
    """A key whose ``__hash__`` itself mutates the dicts."""

    def __init__(self, victims: list[dict[str, Any]]) -> None:
        self.victims = victims

    def __hash__(self) -> int:
        for victim in self.victims:
            victim[f"h{len(victim)}"] = 2.0
        return 12345

    def __eq__(self, other: object) -> bool:
        return self is other


class SneakyStr(str):
    """A str id whose comparisons grow the dicts it is compared in."""

    victims: list[dict[str, Any]] = []

    def __eq__(self, other: object) -> bool:
        for victim in self.victims:
            if len(victim) < 2000:
                victim[f"s{len(victim)}"] = 1.0
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class FloatLike:
    """A value read through ``__float__``, which mutates the dicts while numpy reads them."""

    def __init__(self, value: float, victims: list[dict[str, Any]]) -> None:
        self.value, self.victims = value, victims

    def __float__(self) -> float:
        for victim in self.victims:
            if len(victim) < 400:
                victim[f"f{len(victim)}"] = 0.5
        return self.value


class FloatSub(float):
    pass


class DictSub(dict):  # type: ignore[type-arg]
    pass
# -- the compiled reader called directly ---------------------------------------------------------------------------
def check_buffers(out: Any, runs: list[Any], judged: list[Any]) -> bool:
    """None (declined), or four bytearrays whose sizes and ranks match the input exactly; False when declined."""
    if out is None:
        return False
    assert isinstance(out, tuple) and len(out) == 4 and all(type(b) is bytearray for b in out), out
    n, total = len(runs), sum(len(j) for j in judged)
    num_ret, qlen, ranks = (np.frombuffer(b, dtype=np.int64) for b in out[:3])
    grades = np.frombuffer(out[3], dtype=np.float64)
    assert len(num_ret) == len(qlen) == n and len(ranks) == len(grades) == total
    assert num_ret.tolist() == [len(r) for r in runs] and qlen.tolist() == [len(j) for j in judged]
    ends = np.cumsum(qlen)
    for q in range(n):
        part = ranks[ends[q] - qlen[q] : ends[q]]
        assert ((part >= -1) & (part < max(num_ret[q], 0))).all(), (q, part, num_ret[q])
    return True


def direct(reader: Any, runs: Any, judged: Any, lists: Any) -> int:
    """Call both entry points on hostile containers; count the calls that were read rather than declined."""
    read = 0
    for limit in (1 << 40, -1, 0):
        read += check_buffers(reader.rank_chunk(runs, judged, limit), runs, judged)
    read += check_buffers(reader.rank_lists_chunk(lists, judged), lists, judged)
    return read


def direct_cases(reader: Any, rng: random.Random, rounds: int) -> tuple[int, int]:
    """Fixed odd shapes, then random per-query containers built from plain and hostile parts."""
    calls = read = 0
    for runs, judged in [("x", []), ([], ()), ([{}], []), ([None], [None]), ([{}], [{}]), ([], []),
                         ([DictSub(a=1.0)], [{"a": 1}]), ([OrderedDict(a=1.0)], [{"a": 1}]),
                         ([{"a": 1.0}], [DictSub(a=1)])]:
        calls += 1
        read += direct(reader, runs, judged, runs)
    for arg in ((), ([],), ([], [], "x"), ([], [], 1, 2)):
        try:
            reader.rank_chunk(*arg)
        except TypeError:
            pass
    for _ in range(rounds):
        runs, judged, lists = random_dicts(rng)
        calls += 1
        read += direct(reader, runs, judged, lists)
    return calls, read


ODD_VALUES: list[Callable[[list[dict[str, Any]]], Any]] = [
    lambda v: True, lambda v: False, lambda v: np.int64(3), lambda v: np.float32(0.25), lambda v: np.float64(0.5),
    lambda v: 10**400, lambda v: -(10**400), lambda v: 2**63, lambda v: float("nan"), lambda v: float("inf"),
    lambda v: float("-inf"), lambda v: -0.0, lambda v: FloatLike(0.75, v), lambda v: FloatSub(0.5), lambda v: "0.5",
    lambda v: None, lambda v: 1e308, lambda v: 5e-324,
]


def random_dicts(rng: random.Random) -> tuple[list[Any], list[Any], list[Any]]:
    """Per-query run dicts, qrels dicts and ranked lists with, now and then, a hostile key, value or container."""
    n = rng.randint(0, 12)
    pool = [f"{rng.choice(['d', 'é', '', 'd' * 40])}{i}" for i in range(rng.randint(1, 80))]
    runs: list[Any] = []
    judged: list[Any] = []
    lists: list[Any] = []
    everything: list[dict[str, Any]] = []
    for _ in range(n):
        docs = rng.sample(pool, rng.randint(0, len(pool)))
        run: dict[Any, Any] = {d: rng.choice([rng.random(), rng.randint(-3, 3), 0.5]) for d in docs}
        grades: dict[Any, Any] = {d: rng.choice([0, 1, 2, 1.5]) for d in rng.sample(pool, rng.randint(0, len(pool)))}
        everything += [run, grades]
        runs.append(run)
        judged.append(grades)
        lists.append(list(run) if rng.random() < 0.7 else tuple(run))
    for _ in range(rng.choice([0, 0, 1, 3])):
        if not n:
            break
        q = rng.randrange(n)
        target = rng.choice([runs, judged])[q]
        kind = rng.randrange(8)
        if kind == 0:
            target[Grower(rng.choice(pool), everything)] = 1.0
        elif kind == 1:
            target[SneakyStr(rng.choice(pool) + "x")] = 1.0
        elif kind == 2:
            target[rng.choice(pool)] = rng.choice(ODD_VALUES)(everything)
        elif kind == 3:
            runs[q] = DictSub(runs[q])
        elif kind == 4:
            judged[q] = runs[q]  # one dict as both run and qrels
        elif kind == 5:
            runs[q] = runs[rng.randrange(n)]  # shared between queries
        elif kind == 6:
            lists[q] = [*lists[q], *lists[q][:1]]  # a duplicate
        else:
            lists[q] = [*lists[q], rng.choice([7, None, SneakyStr("z"), b"d1"])]
    if n and rng.random() < 0.1:
        (runs if rng.random() < 0.5 else judged).pop()  # ragged: the lists differ in length
    return runs, judged, lists


# -- the engine on both paths -------------------------------------------------------------------------------------
def hostile_case(seed: int) -> Callable[[], tuple[Any, Any, Any]]:
    """A builder of (qrels, run, rankings) whose outer dicts hold keys that mutate the inner ones on lookup.

    Each path gets a fresh copy, so each sees the same mutations in the same order.
    """

    def build() -> tuple[Any, Any, Any]:
        rng = random.Random(seed)
        runs, judged, lists = random_dicts(rng)
        n = min(len(runs), len(judged))
        qids = [f"q{i}" for i in range(n)]
        inner = [d for d in [*runs[:n], *judged[:n]] if isinstance(d, dict)]
        run: dict[Any, Any] = {}
        qrels: dict[Any, Any] = {}
        rankings: dict[Any, Any] = {}
        # hostile outer keys first, so that they sit where the real query ids' lookups probe first
        for outer in (run, qrels, rankings):
            for _ in range(rng.choice([0, 1, 2])):
                if not qids:
                    break
                kind = rng.randrange(3)
                victims = rng.sample(inner, min(len(inner), rng.randint(1, 4)))
                if kind == 0:
                    outer[Grower(rng.choice(qids), victims)] = {}
                elif kind == 1:
                    outer[Clearer(rng.choice(qids), victims)] = {}
                else:
                    outer[HashMutator(victims)] = {}
        for i, q in enumerate(qids):
            run[q], qrels[q], rankings[q] = runs[i], judged[i], lists[i]
        if rng.random() < 0.2:
            run = DictSub(run)
        return qrels, run, rankings

    return build


def outcome(fn: Callable[..., Any], *args: Any, **options: Any) -> str:
    """The result or the error's type and message, as text without object addresses (nan == nan)."""
    try:
        text = repr(fn(*args, METRICS, per_query=True, **options))
    except Exception as exc:  # the same error on both paths is the contract
        text = repr((type(exc).__name__, str(exc)))
    return re.sub(r" at 0x[0-9a-f]+", "", text)


def both_paths(reader: Any, build: Callable[[], tuple[Any, Any, Any]]) -> None:
    results = []
    for fast in (None, reader):
        engine._fastrank = fast
        for options in ({}, {"complete": True}):
            qrels, run, _ = build()
            results.append(outcome(engine.evaluate_run, qrels, run, **options))
            qrels, _, rankings = build()
            results.append(outcome(engine.evaluate_rankings, qrels, rankings, **options))
    half = len(results) // 2
    assert results[:half] == results[half:], (results[:half], results[half:])


def lookup_growth_case() -> Callable[[], tuple[Any, Any, Any]]:
    """The crash of the first design: a query id's lookup grows an earlier query's qrels after they were sized."""

    def build() -> tuple[Any, Any, Any]:
        first = {"a": 1, "b": 0}
        run: dict[Any, Any] = {}
        qrels: dict[Any, Any] = {}
        rankings: dict[Any, Any] = {}
        for outer in (run, qrels, rankings):
            outer[Grower("q1", [first])] = {}
        for q, grades in (("q0", first), ("q1", {"a": 1})):
            run[q] = {"a": 0.5, "b": 0.25, "c": 0.75}
            qrels[q] = grades
            rankings[q] = ["c", "a", "b"]
        return qrels, run, rankings

    return build


def resample_cases(reader: Any, rng: random.Random, rounds: int) -> int:
    """``resample_sums`` on hostile arrays: a clear TypeError/ValueError, or the sums numpy's counts give."""
    kernel = reader.resample_sums
    calls = 0

    def expect_error(errors: tuple[type[Exception], ...], *args: Any) -> None:
        nonlocal calls
        calls += 1
        try:
            kernel(*args)
        except errors as exc:
            assert str(exc).startswith("resample_sums: "), exc
            return
        raise AssertionError(f"resample_sums accepted {[getattr(a, 'dtype', type(a)) for a in args]}")

    x = np.random.default_rng(1).random((7, 3))
    good = np.zeros((2, 7), dtype=np.int64)
    out = np.zeros((2, 3))
    bad_types = (TypeError,)
    expect_error(bad_types, good.astype(np.int32), x, out)
    expect_error(bad_types, good.astype(np.float64), x, out)
    expect_error(bad_types, good.astype(">i8"), x, out)
    expect_error(bad_types, good, x.astype(np.float32), out)
    expect_error(bad_types, good, x.astype(">f8"), out)
    expect_error(bad_types, good, x, out.astype(np.int64))
    expect_error(bad_types, good.ravel(), x, out)
    expect_error(bad_types, good, x.ravel(), out)
    expect_error(bad_types, np.zeros((2, 14), dtype=np.int64)[:, ::2], x, out)  # strided
    expect_error(bad_types, good, np.asfortranarray(np.random.default_rng(2).random((7, 3))), out)
    frozen = out.copy()
    frozen.flags.writeable = False
    expect_error(bad_types, good, x, frozen)
    expect_error(bad_types, b"\0" * 112, x, out)
    expect_error(bad_types, "not an array", x, out)
    expect_error((ValueError,), good, x, np.zeros((1, 3)))  # too few output rows
    expect_error((ValueError,), good, x, np.zeros((2, 2)))
    expect_error((ValueError,), good, np.zeros((6, 3)), out)
    expect_error((ValueError,), np.zeros((2, 0), dtype=np.int64), np.zeros((0, 3)), out)
    expect_error((ValueError,), good, np.zeros((7, 0)), np.zeros((2, 0)))
    for bad in (-1, 7, 2**62, -(2**63)):
        index = good.copy()
        index[-1, -1] = bad
        expect_error((ValueError,), index, x, out)
    for _ in range(rounds):
        n, m, rows = rng.randint(1, 40), rng.randint(1, 9), rng.randint(0, 6)
        x = np.random.default_rng(rng.randrange(2**32)).random((n, m)) * 10 - 5
        index = np.random.default_rng(rng.randrange(2**32)).integers(0, n, size=(rows, n))
        out = np.full((rows, m), np.nan)
        kernel(index, x, out)
        calls += 1
        counts = np.zeros((rows, n))
        for r in range(rows):
            counts[r] = np.bincount(index[r], minlength=n)
        np.testing.assert_allclose(out, counts @ x, rtol=1e-12, atol=1e-12)
    # a second thread writes bad indexes while the kernel runs without the GIL: an error or right-sized sums
    import threading

    n = 50_000
    index = np.random.default_rng(3).integers(0, n, size=(40, n))
    x = np.random.default_rng(4).random((n, 4))
    stop = threading.Event()

    def scribble() -> None:
        spots = np.random.default_rng(5)
        while not stop.is_set():
            index.flat[spots.integers(0, index.size, 64)] = spots.choice([-1, n, 2**40], 64)

    writer = threading.Thread(target=scribble)
    writer.start()
    try:
        for _ in range(5):
            calls += 1
            try:
                kernel(index, x, np.empty((40, 4)))
            except ValueError as exc:
                assert "outside [0, n)" in str(exc), exc
    finally:
        stop.set()
        writer.join()
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.pop("EVRET_PURE_PYTHON", None)
    reader = load_reader()
    rng = random.Random(args.seed)
    calls, read = direct_cases(reader, rng, args.rounds)
    resampled = resample_cases(reader, rng, args.rounds)
    both_paths(reader, lookup_growth_case())
    for i in range(args.rounds // 4):
        both_paths(reader, hostile_case(args.seed * 100_003 + i))
    print(f"ok: {calls} direct calls ({read} read, the rest declined), {args.rounds // 4 + 1} engine cases, "
          f"{resampled} resample_sums calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
