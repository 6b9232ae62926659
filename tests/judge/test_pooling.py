"""The judging pool of `evret judge`: the union of the runs' top documents, best rank first, then run order."""

from __future__ import annotations

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.judge.pooling import pool_runs

RUN_A = {"q1": ["a", "b", "c", "d"], "q2": ["x", "y"]}
RUN_B = {"q1": ["c", "a", "e"], "q2": ["z", "x"], "q9": ["n"]}


def test_the_pool_is_judged_best_rank_first_then_run_order_then_query_order() -> None:
    pool = pool_runs(["q1", "q2"], [RUN_A, RUN_B], depth=3)
    # rank 1: a (run A, q1), x (run A, q2), c (run B, q1), z (run B, q2); rank 2: b, y; rank 3: e
    assert pool.pairs == [("q1", "a"), ("q2", "x"), ("q1", "c"), ("q2", "z"), ("q1", "b"), ("q2", "y"),
                          ("q1", "e")]
    assert pool.per_query == {"q1": 4, "q2": 3} and pool.skipped == 0
    assert pool.extra_queries == ["q9"]  # a run's query that is not among the queries: ignored, named


def test_depth_cuts_each_run_and_a_shallower_prefix_is_a_complete_pool() -> None:
    deep = pool_runs(["q1", "q2"], [RUN_A, RUN_B], depth=3).pairs
    shallow = pool_runs(["q1", "q2"], [RUN_A, RUN_B], depth=1).pairs
    assert shallow == deep[: len(shallow)] == [("q1", "a"), ("q2", "x"), ("q1", "c"), ("q2", "z")]
    assert ("q1", "d") not in pool_runs(["q1"], [RUN_A], depth=3).pairs


def test_judged_pairs_are_skipped_and_counted() -> None:
    pool = pool_runs(["q1", "q2"], [RUN_A, RUN_B], depth=3, judged={"q1": {"a": 2.0, "zz": 0.0}, "q2": {"y": 1}})
    assert ("q1", "a") not in pool.pairs and ("q2", "y") not in pool.pairs
    assert pool.skipped == 2 and pool.per_query == {"q1": 3, "q2": 2}


def test_a_query_no_run_retrieved_has_an_empty_pool_and_a_repeat_counts_once() -> None:
    pool = pool_runs(["q1", "q3"], [{"q1": ["a", "a", "b"]}], depth=2)
    assert pool.pairs == [("q1", "a")] and pool.per_query == {"q1": 1, "q3": 0}


@pytest.mark.parametrize("depth", [0, -1, True, 2.5])
def test_a_bad_depth_is_refused(depth: object) -> None:
    with pytest.raises(EvretError, match="depth"):
        pool_runs(["q1"], [RUN_A], depth=depth)  # type: ignore[arg-type]
