"""The reranker contract (evret_core.contracts.rerank): the base class orders by the reranker's score with ties in
the first stage's order, cuts to k, keeps each candidate's metadata, and refuses bad candidates and bad scores with
an EvretError before (or instead of) using them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult


class Fixed(Reranker):
    """Scores each candidate from a table by id (missing ids score 0)."""

    name = "fixed"

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def batch_score(self, queries: Sequence[str], candidates: Sequence[RankedColumns]) -> list[Sequence[float]]:
        self.calls.append(list(queries))
        return [[self.table.get(str(d), 0.0) for d in c.ids] for c in candidates]


def results(*ids: str) -> list[RetrievalResult]:
    return [RetrievalResult(doc_id=d, score=float(len(ids) - i), metadata={"text": f"text of {d}", "rank": i})
            for i, d in enumerate(ids)]


def test_orders_by_score_ties_in_the_first_stage_order_and_cuts_to_k() -> None:
    reranker = Fixed({"a": 1.0, "b": 2.0, "c": 1.0, "d": 2.0})
    ranked = reranker.rerank("q", results("a", "b", "c", "d", "e"), 10)
    assert [(r.doc_id, r.score) for r in ranked] == [("b", 2.0), ("d", 2.0), ("a", 1.0), ("c", 1.0), ("e", 0.0)]
    # the same candidates listed in another first-stage order: the ties follow that order
    assert [r.doc_id for r in reranker.rerank("q", results("e", "d", "c", "b", "a"), 3)] == ["d", "b", "c"]
    assert ranked[0].metadata == {"text": "text of b", "rank": 1}  # the candidate's own metadata


def test_one_scoring_call_per_batch_and_none_for_empty_lists() -> None:
    reranker = Fixed({"a": 1.0})
    got = reranker.batch_rerank(["q1", "q2", "q3"], [results("a", "b"), [], results("b", "a")], 1)
    assert [[r.doc_id for r in rs] for rs in got] == [["a"], [], ["a"]]
    assert reranker.calls == [["q1", "q3"]]  # the empty list is not sent to the reranker
    assert reranker.batch_rerank([], [], 5) == [] and reranker.calls == [["q1", "q3"]]


def test_columns_in_columns_out() -> None:
    columns = RankedColumns(["x", "y"], [5.0, 4.0], ["tx", "ty"])
    [ranked] = Fixed({"y": 3.0}).batch_rerank_columns(["q"], [columns], 2)
    assert list(ranked.ids) == ["y", "x"] and list(ranked.scores) == [3.0, 0.0] and list(ranked.texts or []) == [
        "ty", "tx"]


def test_score_defaults_to_batch_score_and_back() -> None:
    assert list(Fixed({"a": 4.0}).score("q", RankedColumns(["a"], [1.0], ["t"]))) == [4.0]

    class OnlyScore(Reranker):
        def score(self, query: str, candidates: RankedColumns) -> list[float]:
            return [float(len(query))] * len(candidates)

    assert OnlyScore().batch_score(["ab", "abc"], [RankedColumns(["a"], [1.0], ["t"])] * 2) == [[2.0], [3.0]]
    with pytest.raises(NotImplementedError, match="neither score nor batch_score"):
        Reranker().rerank("q", results("a"), 1)


@pytest.mark.parametrize(("candidates", "message"), [
    (results("a", "b", "a"), "has document 'a' twice among its candidates"),
    ([*results("a"), RetrievalResult(doc_id="b")], "document 'b' of query 'q' has none"),
])
def test_bad_candidates_are_refused_before_scoring(candidates: list[RetrievalResult], message: str) -> None:
    reranker = Fixed({})
    with pytest.raises(EvretError, match=message):
        reranker.rerank("q", candidates, 3)
    assert reranker.calls == []


def test_a_reranker_reading_ids_only_takes_candidates_without_text() -> None:
    class IdsOnly(Fixed):
        requires_text = False

    assert [r.doc_id for r in IdsOnly({"b": 1.0}).rerank("q", [RetrievalResult(doc_id="a"),
                                                                 RetrievalResult(doc_id="b")], 2)] == ["b", "a"]


class Returns(Reranker):
    name = "returns"

    def __init__(self, scores: Any) -> None:
        self.scores = scores

    def score(self, query: str, candidates: RankedColumns) -> Any:
        return self.scores


@pytest.mark.parametrize(("scores", "message"), [
    ([1.0], "returned 1 scores for the 2 candidates"),
    ([1.0, math.nan], "scored document 'b' of query 'q' nan: scores must be finite"),
    ([math.inf, 1.0], "scored document 'a' of query 'q' inf"),
    (["high", "low"], "are not numbers"),
])
def test_bad_scores_are_an_error_naming_the_reranker(scores: Any, message: str) -> None:
    with pytest.raises(EvretError, match=f"reranker 'returns'.*{message}"):
        Returns(scores).rerank("q", results("a", "b"), 2)


def test_a_wrong_number_of_score_lists_and_a_bad_k_are_errors() -> None:
    class Short(Reranker):
        name = "short"

        def batch_score(self, queries: Sequence[str], candidates: Sequence[RankedColumns]) -> list[Sequence[float]]:
            return []

    with pytest.raises(EvretError, match="returned 0 score lists for 1 queries"):
        Short().rerank("q", results("a"), 1)
    for k in (0, -1, 2.5, True):
        with pytest.raises(EvretError, match="k must be a positive integer"):
            Fixed({}).rerank("q", results("a"), k)  # type: ignore[arg-type]
    with pytest.raises(EvretError, match="2 queries and 1 candidate lists"):
        Fixed({}).batch_rerank_columns(["a", "b"], [RankedColumns(["a"], [1.0], ["t"])], 1)


def test_config_and_stats_defaults() -> None:
    assert Fixed({}).config() == {"name": "fixed"} and Fixed({}).stats() == {}
