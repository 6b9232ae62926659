"""A plain class (no Evret base class) with only ``retrieve(query, k)`` or only ``batch_retrieve(queries, k)`` is a
retriever, as the error message and docs say; one whose method takes other arguments is refused by name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample
from evret_core.retrieve.retrievers import resolve_retriever

DOCS = {"d1": "the queen lays eggs", "d2": "drones are male bees", "d3": "workers make wax"}


def dataset() -> EvaluationDataset:
    return EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="who lays eggs", relevant_doc_ids=["d1"]),
        QueryExample(query_id="b", query_text="what are drones", relevant_doc_ids=["d2"]),
    ])


def search(query: str, k: int) -> list[dict[str, Any]]:
    """Documents sharing a word with the query first, then the rest, as plain dicts."""
    words = set(query.split())
    ranked = sorted(DOCS, key=lambda d: -len(words & set(DOCS[d].split())))
    return [{"doc_id": d, "text": DOCS[d], "score": float(len(words & set(DOCS[d].split())))} for d in ranked][:k]


class OnlyRetrieve:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        self.calls.append((query, k))
        return search(query, k)


class OnlyBatch:
    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[dict[str, Any]]]:
        return [search(q, k) for q in queries]


class OneArgument:
    def retrieve(self, query: str) -> list[dict[str, Any]]:
        return search(query, 3)


@pytest.mark.parametrize("make", [OnlyRetrieve, OnlyBatch])
def test_an_object_with_one_retrieval_method_is_evaluated(make: type) -> None:
    retriever = make()
    results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"]).evaluate(dataset())
    assert results.scores["recall@1"] == 1.0 and results.scores["mrr"] == 1.0
    assert [r.doc_id for r in resolve_retriever(retriever).retrieve("drones are", 2)] == ["d2", "d1"]
    if isinstance(retriever, OnlyRetrieve):
        assert ("who lays eggs", 1) in retriever.calls  # the user's own method answered, at the asked depth


def test_a_method_that_does_not_take_query_and_k_is_refused_by_name() -> None:
    with pytest.raises(EvretError, match=r"cannot use OneArgument as a retriever: its retrieve does not take "
                                         r"\(query, k\)"):
        resolve_retriever(OneArgument())


def test_bad_results_of_a_plain_object_name_it() -> None:
    class Broken:
        def retrieve(self, query: str, k: int) -> Any:
            return [{"text": "no id"}]

    with pytest.raises(EvretError, match=r"Broken\.retrieve: result 0 has no 'doc_id'"):
        Evaluator(retriever=Broken(), metrics=["recall@1"]).evaluate(dataset())
