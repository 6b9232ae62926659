"""The optional compiled dict reader of the metrics engine: built where it can be, used, and exact."""

from __future__ import annotations

import math
import os
import random
import shutil
import sysconfig
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evret_core import EvretError, evaluate_rankings, evaluate_run
from evret_core.metrics import engine

METRICS = ["precision@5", "recall@10", "f1@5", "hit_rate@3", "mrr@5", "mrr", "ndcg@5", "ndcg", "ap@10", "ap",
           "r_precision", "bpref", "err@5", "rbp", "rbp_residual", "num_rel_ret", "num_rel", "num_ret"]


def _can_compile() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(cc) is not None and headers.exists()


class _Spy:
    def __init__(self, real: Any, scan_limit: int = 48) -> None:
        self.real, self.scan_limit, self.read, self.declined = real, scan_limit, 0, 0

    def rank_chunk(self, runs: Any, judged: Any) -> Any:
        out = self.real.rank_chunk(runs, judged, self.scan_limit)
        self.read += out is not None
        self.declined += out is None
        return out


def _outcome(fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:  # the same error type and message on both paths is the contract
        return (type(exc).__name__, str(exc))


def _both(monkeypatch: pytest.MonkeyPatch, qrels: Any, run: Any, **options: Any) -> tuple[Any, list[Any], _Spy]:
    """The numpy path's result, then the compiled reader's with each rank strategy (scan, sort), and a spy."""
    real = engine._fastrank
    if real is None:
        pytest.skip("the compiled accelerator is not built")
    with monkeypatch.context() as m:
        m.setenv("EVRET_PURE_PYTHON", "1")
        pure = _outcome(lambda: evaluate_run(qrels, run, METRICS, per_query=True, **options))
    monkeypatch.delenv("EVRET_PURE_PYTHON", raising=False)
    results = []
    spy = _Spy(real)
    for limit in (1 << 40, -1):
        spy.scan_limit = limit
        monkeypatch.setattr(engine, "_fastrank", spy)
        results.append(_outcome(lambda: evaluate_run(qrels, run, METRICS, per_query=True, **options)))
    monkeypatch.setattr(engine, "_fastrank", real)
    return pure, results, spy


def test_accelerator_is_built_wherever_it_can_be_and_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    if engine._fastrank is None:
        assert not (_can_compile() or os.environ.get("CI")), (
            "a C compiler and Python.h are here but evret_core.metrics._fastrank was not built: "
            "reinstall (pip install -e .) and check the build log"
        )
        pytest.skip("no C compiler: evret-core installed without its accelerator, as designed")
    monkeypatch.delenv("EVRET_PURE_PYTHON", raising=False)
    assert engine.accelerator() is engine._fastrank
    spy = _Spy(engine._fastrank)
    monkeypatch.setattr(engine, "_fastrank", spy)
    qrels = {f"q{i}": {"a": 1, "b": 2} for i in range(5000)}
    run = {f"q{i}": {"a": 0.5, "b": 0.5, "c": 0.9} for i in range(5000)}
    got = evaluate_run(qrels, run, ["mrr", "ndcg@2"], per_query=True)
    assert spy.read == 3 and spy.declined == 0  # 5000 queries: three chunks of 2048, all read in C
    assert got["q7"]["mrr"] == 0.5  # c, then the tie b > a
    for value in ("1", "yes"):
        monkeypatch.setenv("EVRET_PURE_PYTHON", value)
        assert engine.accelerator() is None
        evaluate_run(qrels, run, ["mrr"])
    assert spy.read == 3
    monkeypatch.setenv("EVRET_PURE_PYTHON", "0")
    assert engine.accelerator() is spy


def _random_case(rng: random.Random) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Queries with heavy ties, ragged and empty runs, ids sharing prefixes, unretrieved and unjudged docs."""
    qrels: dict[str, dict[str, Any]] = {}
    run: dict[str, dict[str, Any]] = {}
    for q in range(rng.randint(1, 40)):
        pool = [f"{rng.choice(['d', 'D', 'd1', 'é', ''])}{rng.randint(0, 300)}" for _ in range(rng.randint(1, 160))]
        pool = list(dict.fromkeys(pool))
        levels = rng.choice([[1.0], [0.5, 1.0], [-1.0, 0.0, 1.0, 2.0], [float("inf"), 3.0, -float("inf")]])
        retrieved = rng.sample(pool, rng.randint(0, len(pool)))
        run[f"q{q}"] = {doc: rng.choice([rng.choice(levels), rng.randint(-2, 2), rng.random()]) for doc in retrieved}
        judged = rng.sample(pool, rng.randint(0, min(len(pool), 90)))
        qrels[f"q{q}"] = {doc: rng.choice([0, 1, 2, 3, -1, 1.5]) for doc in judged}
    # queries only on one side
    run["only_run"] = {"x": 1.0}
    qrels["only_qrels"] = {"x": 1}
    return qrels, run


@pytest.mark.parametrize("seed", range(12))
def test_random_runs_with_ties_agree_exactly_between_paths(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    qrels, run = _random_case(rng)
    for options in ({}, {"complete": True}, {"relevance_level": 2}):
        pure, compiled, spy = _both(monkeypatch, qrels, run, **options)
        assert spy.declined == 0
        for got in compiled:
            assert got == pure  # identical floats per query and metric, not approximately


def test_unusual_inputs_are_declined_and_give_the_pure_paths_result(monkeypatch: pytest.MonkeyPatch) -> None:
    qrels = {"q": {"a": 1, "b": 2}, "r": {"a": 1}}
    base = {"q": {"a": 0.5, "b": 0.5, "c": 0.9}, "r": {"a": 1.0}}
    # accepted as they are: numpy float64 scores, outer mappings of any kind (the queries are looked up in
    # Python, through the mapping's own get, before the C reader sees the per-query dicts)
    class Plain(dict):  # type: ignore[type-arg]
        pass

    class Custom(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            return super().get(key, default)

    for run in ({"q": {k: np.float64(v) for k, v in base["q"].items()}, "r": base["r"]}, Plain(base),
                Custom(base)):
        pure, compiled, spy = _both(monkeypatch, qrels, run)
        assert spy.declined == 0 and all(c == pure for c in compiled)

    class Str(str):
        pass

    declined = [
        {"q": {"a": np.int64(1), "b": 1, "c": 2}, "r": base["r"]},  # numpy integers
        {"q": {"a": True, "b": 1.0, "c": 2.0}, "r": base["r"]},  # bools
        {"q": OrderedDict(base["q"]), "r": base["r"]},  # not a plain dict
        {"q": {"a": 1.0, 7: 2.0}, "r": base["r"]},  # a non-str document id
        {"q": {"a": 10**400, "b": 1.0}, "r": base["r"]},  # too big for a float
        {"q": {"a": float("nan"), "b": 1.0}, "r": base["r"]},  # NaN: the pure path names it
        {"q": {"a": "high", "b": 1.0}, "r": base["r"]},  # non-numeric
        {"q": {Str("a"): 0.5, "b": 0.5}, "r": base["r"]},  # a str subclass as an id
        {"q": {"a": 0.5, "b": np.float32(0.5)}, "r": base["r"]},  # a float-like that is not a float
    ]
    for run in declined:
        pure, compiled, spy = _both(monkeypatch, qrels, run)
        assert all(c == pure for c in compiled), run
        assert spy.read == 0 and spy.declined == 2  # declined in C, read by the numpy path
    pure, compiled, _ = _both(monkeypatch, {"q": {"a": 1, "b": "yes"}}, base)
    assert pure == compiled[0] == compiled[1] == (
        "EvretError", "qrels: query q: document 'b' has a non-numeric grade 'yes'")
    with pytest.raises(EvretError, match="NaN score"):
        evaluate_run(qrels, declined[5], ["ap"])
    assert math.isfinite(evaluate_run(qrels, declined[0], ["ap"])["ap"])


# -- ranked lists (evaluate_rankings) ---------------------------------------------------------------------------
class _ListSpy:
    def __init__(self, real: Any) -> None:
        self.real, self.read, self.declined = real, 0, 0

    def rank_lists_chunk(self, lists: Any, judged: Any) -> Any:
        out = self.real.rank_lists_chunk(lists, judged)
        self.read += out is not None
        self.declined += out is None
        return out


def _both_lists(monkeypatch: pytest.MonkeyPatch, qrels: Any, rankings: Any, **options: Any) -> tuple[Any, Any, _ListSpy]:
    """evaluate_rankings on the numpy path, then with the compiled list reader (and a spy on it)."""
    real = engine._fastrank
    if real is None:
        pytest.skip("the compiled accelerator is not built")
    with monkeypatch.context() as m:
        m.setenv("EVRET_PURE_PYTHON", "1")
        pure = _outcome(lambda: evaluate_rankings(qrels, rankings, METRICS, per_query=True, **options))
    monkeypatch.delenv("EVRET_PURE_PYTHON", raising=False)
    spy = _ListSpy(real)
    monkeypatch.setattr(engine, "_fastrank", spy)
    compiled = _outcome(lambda: evaluate_rankings(qrels, rankings, METRICS, per_query=True, **options))
    monkeypatch.setattr(engine, "_fastrank", real)
    return pure, compiled, spy


def test_list_reader_is_used_and_switched_off_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    if engine._fastrank is None:
        pytest.skip("the compiled accelerator is not built")
    monkeypatch.delenv("EVRET_PURE_PYTHON", raising=False)
    spy = _ListSpy(engine._fastrank)
    monkeypatch.setattr(engine, "_fastrank", spy)
    qrels = {f"q{i}": {"a": 1, "b": 2} for i in range(5000)}
    rankings = {f"q{i}": ["c", "b", "a"] for i in range(5000)}
    got = evaluate_rankings(qrels, rankings, ["mrr", "ndcg@2"], per_query=True)
    assert spy.read == 3 and spy.declined == 0  # three chunks of 2048, all read in C
    assert got["q7"]["mrr"] == 0.5
    monkeypatch.setenv("EVRET_PURE_PYTHON", "1")
    assert evaluate_rankings(qrels, rankings, ["mrr", "ndcg@2"], per_query=True) == got
    assert spy.read == 3  # the environment switch kept it on the numpy path


def _random_lists(rng: random.Random) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Ragged, empty and long lists (tuples too), ids sharing prefixes, equal ids that are distinct objects."""
    qrels: dict[str, dict[str, Any]] = {}
    rankings: dict[str, Any] = {}
    for q in range(rng.randint(1, 60)):
        pool = [f"{rng.choice(['d', 'D', 'd1', 'é', ''])}{rng.randint(0, 400)}" for _ in range(rng.randint(1, 250))]
        pool = list(dict.fromkeys(pool))
        listed = rng.sample(pool, rng.randint(0, len(pool)))
        # copies built at run time: equal strings, different objects, hash not yet cached
        listed = ["".join(list(doc)) for doc in listed]
        rankings[f"q{q}"] = tuple(listed) if rng.random() < 0.3 else listed
        judged = rng.sample(pool, rng.randint(0, min(len(pool), 90)))
        qrels[f"q{q}"] = {doc: rng.choice([0, 1, 2, 3, -1, 1.5]) for doc in judged}
    rankings["only_rankings"] = ["x"]
    qrels["only_qrels"] = {"x": 1}
    return qrels, rankings


@pytest.mark.parametrize("seed", range(12))
def test_random_rankings_agree_exactly_between_paths(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    qrels, rankings = _random_lists(random.Random(seed))
    for options in ({}, {"complete": True}, {"relevance_level": 2}):
        pure, compiled, spy = _both_lists(monkeypatch, qrels, rankings, **options)
        assert spy.declined == 0 and spy.read > 0
        assert compiled == pure  # identical floats per query and metric


def test_duplicate_in_a_ranking_gives_the_same_error_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    qrels = {f"q{i}": {"d1": 1} for i in range(50)}
    rankings: dict[str, Any] = {f"q{i}": ["d1", "d2", "d3"] for i in range(50)}
    rankings["q31"] = ["d1", "d2", "".join(["d", "2"])]  # equal to an earlier id, a different object
    pure, compiled, spy = _both_lists(monkeypatch, qrels, rankings)
    assert pure == compiled == ("EvretError", "query q31: document 'd2' is ranked more than once")
    assert spy.declined == 1 and spy.read == 0


def test_unusual_rankings_are_declined_and_give_the_pure_paths_result(monkeypatch: pytest.MonkeyPatch) -> None:
    qrels: dict[str, Any] = {"q": {"a": 1, "b": 2}, "r": {"a": 1}}
    declined = [
        {"q": ["a", 7, "b"], "r": ["a"]},  # a non-str id
        {"q": iter(["a", "b"]), "r": ["a"]},  # not a list or tuple
        {"q": ["a", "b"], "r": ["a", "a"]},  # a duplicate
    ]
    for rankings in declined:
        pure, compiled, spy = _both_lists(monkeypatch, qrels, rankings)
        assert compiled == pure and spy.read == 0 and spy.declined == 1, rankings
    # qrels that are not a mapping, or a grade that is not a number, fail before the reader is asked: err's default
    # max_grade reads every judgment first (the same error on both paths); a bool grade reaches the reader
    for odd_qrels, asked in (({"q": {"a": True, "b": 2}, "r": {"a": 1}}, 1), ({"q": ["a", "b"], "r": {"a": 1}}, 0),
                             ({"q": {"a": 1, "b": "yes"}, "r": {"a": 1}}, 0)):
        pure, compiled, spy = _both_lists(monkeypatch, odd_qrels, {"q": ["b", "a"], "r": ["a"]})
        assert compiled == pure and spy.read == 0 and spy.declined == asked, odd_qrels
    # accepted: tuples, numpy float64 grades
    pure, compiled, spy = _both_lists(monkeypatch, {"q": {"a": np.float64(1), "b": 2.0}}, {"q": ("b", "c", "a")})
    assert compiled == pure and spy.read == 1 and spy.declined == 0
