"""The retrieval evaluator: the reference example, matching modes by hand, id labels, every retriever kind."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evret_core import (
    EvaluationDataset,
    EvaluationResults,
    Evaluator,
    EvretError,
    ExactJudge,
    Judge,
    JudgmentContext,
    QueryExample,
    RegexJudge,
    RetrievalResult,
    Retriever,
    TokenOverlapJudge,
    create_retrieval_evaluator,
)

from .._helpers import FakePlugin


def result(doc_id: str, text: str | None, score: float = 1.0) -> RetrievalResult:
    return RetrievalResult(doc_id=doc_id, score=score, metadata={} if text is None else {"text": text})


def fixed(results: list[RetrievalResult]) -> Any:
    return lambda query, k: results[:k]


def text_dataset(*answers: str, query: str = "q") -> EvaluationDataset:
    return EvaluationDataset(queries=[QueryExample(query_id="q1", query_text=query, expected_answers=list(answers))])


def test_reference_example() -> None:
    dataset = text_dataset(
        "RAG combines retrieval with generation for better accuracy",
        "Retrieval-augmented generation improves LLM responses",
        query="What is RAG?",
    )
    retrieved = [
        result("doc_123", "RAG is a technique that combines retrieval with generation", 0.95),
        result("doc_456", "Vector databases store embeddings", 0.87),
    ]
    evaluator = Evaluator(fixed(retrieved), metrics=["recall@2", "precision@2", "hit_rate@2", "mrr@2"],
                          judge=TokenOverlapJudge())
    scores = evaluator.evaluate(dataset).scores
    assert scores == {"recall@2": 0.5, "precision@2": 0.5, "hit_rate@2": 1.0, "mrr@2": 1.0}


# Hand-computed: answers alpha, beta; ranking d1 "alpha", d2 "alpha", d3 "gamma", d4 "beta"
RANKING = [result("d1", "alpha"), result("d2", "alpha"), result("d3", "gamma"), result("d4", "beta")]
METRICS = ["precision@2", "precision@4", "recall@2", "recall@4", "mrr@4", "ap@4", "ndcg@4"]


def test_first_match_by_hand() -> None:
    res = Evaluator(fixed(RANKING), metrics=METRICS, judge=ExactJudge()).evaluate(text_dataset("alpha", "beta"))
    # ids: answer:0, answer:0 (a repeat, not relevant again), d3, answer:1; relevant: answer:0, answer:1
    assert res.per_query["q1"].judgments[1].assigned == "answer:0"
    assert [j.matched for j in res.per_query["q1"].judgments] == [[0], [0], [], [1]]
    expected_ndcg = (1 + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert res.scores == pytest.approx({"precision@2": 0.5, "precision@4": 0.5, "recall@2": 0.5, "recall@4": 1.0,
                                        "mrr@4": 1.0, "ap@4": (1 + 2 / 4) / 2, "ndcg@4": expected_ndcg})


def test_any_match_by_hand() -> None:
    res = Evaluator(fixed(RANKING), metrics=METRICS, judge=ExactJudge(), matching="any_match").evaluate(
        text_dataset("alpha", "beta"))
    # relevant docs d1, d2, d4 (3 >= 2 answers); recall counts answers found: top 2 finds alpha only
    expected_ndcg = (1 + 1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert res.scores == pytest.approx({"precision@2": 1.0, "precision@4": 0.75, "recall@2": 0.5, "recall@4": 1.0,
                                        "mrr@4": 1.0, "ap@4": (1 + 1 + 3 / 4) / 3, "ndcg@4": expected_ndcg})


def test_a_document_matching_two_answers() -> None:
    # regex answers "alpha" and "beta"; the one document "alpha beta" matches both
    dataset = text_dataset("alpha", "beta")
    ranking = fixed([result("d1", "alpha beta"), result("d2", "gamma")])
    first = Evaluator(ranking, metrics=["recall@1", "precision@1"], judge=RegexJudge()).evaluate(dataset)
    anym = Evaluator(ranking, metrics=["recall@1", "precision@1", "ap@2"], judge=RegexJudge(),
                     matching="any_match").evaluate(dataset)
    assert first.scores == {"recall@1": 0.5, "precision@1": 1.0}  # d1 takes the first answer it matches
    # any_match: one matching doc but two answers -> two relevant items, one never retrieved
    assert anym.scores == {"recall@1": 1.0, "precision@1": 1.0, "ap@2": 0.5}


def test_first_match_skips_answers_a_higher_document_took() -> None:
    # two documents that both match both answers find both answers: d2 takes "beta", the answer still free
    res = Evaluator(fixed([result("d1", "alpha beta"), result("d2", "alpha beta"), result("d3", "beta")]),
                    metrics=["recall@1", "recall@2", "precision@3"], judge=RegexJudge()).evaluate(
                        text_dataset("alpha", "beta"))
    assert res.scores == {"recall@1": 0.5, "recall@2": 1.0, "precision@3": 2 / 3}
    # d3 matches only "beta", already taken: a repeat of it, not relevant again
    assert [j.assigned for j in res.per_query["q1"].judgments] == ["answer:0", "answer:1", "answer:1"]


class NeverJudge(Judge):
    name = "never"

    def judge(self, context: JudgmentContext) -> bool:
        raise AssertionError("id-labelled queries must not be judged")


def test_graded_id_labels_are_scored_without_judging() -> None:
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="g", query_text="q", relevant_doc_ids={"d1": 2, "d3": 1}),
        QueryExample(query_id="b", query_text="q2", relevant_doc_ids=["d2"]),
    ])
    run = {"g": [result("d3", None), result("d2", None), result("d1", None)], "b": {"d9": 3.0, "d2": 1.0}}
    res = Evaluator(run, metrics=["ndcg@3", "mrr@3"], judge=NeverJudge()).evaluate(dataset)
    # g: DCG = 1/1 + 2/log2(4); ideal 2/1 + 1/log2(3)
    assert res.per_query["g"].scores["ndcg@3"] == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert res.per_query["b"].scores["mrr@3"] == 0.5  # precomputed doc->score run, sorted by score
    assert res.per_query["g"].labelled_by == "ids" and res.stats["judgments"]["unique"] == 0


class CountingJudge(ExactJudge):
    def __init__(self) -> None:
        self.seen: list[JudgmentContext] = []

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool]:
        self.seen.extend(contexts)
        return super().batch_judge(contexts)


def test_duplicate_contexts_are_judged_once() -> None:
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="same", expected_answers=["alpha", "beta"]),
        QueryExample(query_id="b", query_text="same", expected_answers=["alpha"]),
    ])
    judge = CountingJudge()
    res = Evaluator(fixed([result("d1", "alpha"), result("d2", "alpha"), result("d3", "x")]),
                    metrics=["recall@3"], judge=judge).evaluate(dataset)
    # 3 docs x (2 + 1) answers = 9 contexts; distinct (query, expected, retrieved text): 2 answers x 2 texts = 4
    assert res.stats["judgments"] == {"contexts": 9, "unique": 4, "unmeasured": 0}
    assert len(judge.seen) == 4 == len(set(judge.seen))
    assert res.scores["recall@3"] == pytest.approx((0.5 + 1.0) / 2)


def test_retrieves_once_with_the_largest_cutoff() -> None:
    asked: list[int] = []

    def retriever(query: str, k: int) -> list[dict[str, Any]]:
        asked.append(k)
        return [{"doc_id": f"d{i}", "score": 1 / (i + 1), "text": "alpha" if i == 7 else "x"} for i in range(k)]

    res = Evaluator(retriever, metrics=["recall@3", "mrr@10", "hit_rate@8"]).evaluate(text_dataset("alpha"))
    assert asked == [10] and res.scores == {"recall@3": 0.0, "mrr@10": 1 / 8, "hit_rate@8": 1.0}


def test_result_without_text_is_a_clear_error() -> None:
    with pytest.raises(EvretError, match="query 'q1': retrieved document 'd1' \\(rank 1\\) has no text"):
        Evaluator(fixed([result("d1", None)]), metrics=["recall@1"]).evaluate(text_dataset("alpha"))


# -- retriever kinds -----------------------------------------------------------------------------------------------
class ListRetriever(Retriever):
    name = "list"

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return [result("d1", "x"), result("d2", "alpha")][:k]


class AsyncOnly(Retriever):
    async def aretrieve(self, query: str, k: int) -> list[RetrievalResult]:
        await asyncio.sleep(0)
        return [result("d1", "x"), result("d2", "alpha")][:k]


class AsyncBatch:
    """Not a Retriever subclass: a duck-typed retriever whose batch_retrieve is a coroutine function."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        raise AssertionError("the evaluator should use batch_retrieve")

    async def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        self.batches.append(list(queries))
        await asyncio.sleep(0)
        return [[result("d1", "x"), result("d2", "alpha")][:k] for _ in queries]


class ForeignAsync:
    """Only an async method, like some vector-store clients."""

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[dict[str, Any]]]:
        return [[{"id": "d1", "text": "x"}, {"id": "d2", "text": "alpha"}][:k] for _ in queries]


def callable_retriever(query: str, k: int) -> list[dict[str, Any]]:
    return [{"doc_id": "d1", "score": 2.0, "text": "x"}, {"doc_id": "d2", "score": 1.0, "metadata": {"text": "alpha"}}]


async def async_callable(query: str, k: int) -> list[RetrievalResult]:
    return [result("d1", "x"), result("d2", "alpha")]


PRECOMPUTED = {"q1": [result("d1", "x"), result("d2", "alpha")]}


@pytest.mark.parametrize(
    "make",
    [lambda: callable_retriever, lambda: async_callable, lambda: PRECOMPUTED, ListRetriever, AsyncOnly, AsyncBatch,
     ForeignAsync],
    ids=["callable", "async-callable", "precomputed", "subclass", "async-subclass", "async-batch", "async-foreign"],
)
def test_every_retriever_kind(make: Any) -> None:
    res = Evaluator(make(), metrics=["mrr@2", "precision@1"], judge="exact").evaluate(text_dataset("alpha"))
    assert res.scores == {"mrr@2": 0.5, "precision@1": 0.0}
    assert res.per_query["q1"].retrieved_ids == ["d1", "d2"]


def test_async_retrievers_inside_a_running_event_loop() -> None:
    async def main() -> EvaluationResults:
        return Evaluator(AsyncBatch(), metrics=["mrr@2"], judge="exact").evaluate(text_dataset("alpha"))

    assert asyncio.run(main()).scores == {"mrr@2": 0.5}


def test_async_subclass_is_usable_synchronously() -> None:
    retriever = AsyncOnly()
    assert [r.doc_id for r in retriever.retrieve("q", 1)] == ["d1"]
    assert [[r.doc_id for r in rs] for rs in retriever.batch_retrieve(["a", "b"], 2)] == [["d1", "d2"]] * 2


ADAPTER = """
from evret_core import hookimpl, RetrievalResult

class ForeignIndex:
    def search(self, text, top):
        return [("d1", "x"), ("d2", "alpha")][:top]

class Adapted:
    def __init__(self, index):
        self.index = index
    def retrieve(self, query, k):
        return [RetrievalResult(doc_id=i, metadata={"text": t}) for i, t in self.index.search(query, k)]
    def batch_retrieve(self, queries, k):
        return [self.retrieve(q, k) for q in queries]

@hookimpl
def adapt_retriever(obj):
    return Adapted(obj) if isinstance(obj, ForeignIndex) else None
"""


def test_adapt_retriever_through_a_plugin(fake_plugin: FakePlugin) -> None:
    fake_plugin("evret-foreign", ADAPTER)
    import evret_foreign  # type: ignore[import-not-found]

    res = Evaluator(evret_foreign.ForeignIndex(), metrics=["mrr@2"], judge="exact").evaluate(text_dataset("alpha"))
    assert res.scores == {"mrr@2": 0.5}
    with pytest.raises(EvretError, match="cannot use object as a retriever"):
        Evaluator(object(), metrics=["mrr@2"])


def test_wrong_number_of_result_lists() -> None:
    class Short(Retriever):
        def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
            return []

    with pytest.raises(EvretError, match="returned 0 result lists for 1 queries"):
        Evaluator(Short(), metrics=["mrr@2"]).evaluate(text_dataset("alpha"))


# -- evaluator type, options, results ----------------------------------------------------------------------------
def test_registered_as_the_retrieval_evaluator_type() -> None:
    evaluator = create_retrieval_evaluator("retrieval", retriever=PRECOMPUTED, metrics=["mrr@2"], judge="exact")
    assert isinstance(evaluator, Evaluator)
    assert evaluator.evaluate(text_dataset("alpha")).scores == {"mrr@2": 0.5}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"metrics": []}, "no metrics"), ({"metrics": ["mrr@2", "mrr@2"]}, "given twice"),
     ({"metrics": ["mrr@2"], "matching": "best"}, "unknown matching mode 'best'"),
     ({"metrics": ["nope@3"]}, "unknown metric 'nope'"), ({"metrics": ["mrr@2"], "k": 0}, "k must be")],
)
def test_bad_evaluator_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(EvretError, match=message):
        Evaluator(PRECOMPUTED, **kwargs)


def test_results_round_trip(tmp_path: Path) -> None:
    res = Evaluator(fixed(RANKING), metrics=["recall@4", "ndcg@4"], judge=ExactJudge()).evaluate(
        text_dataset("alpha", "beta"))
    path = tmp_path / "results.json"
    res.to_json(path)
    back = EvaluationResults.from_json(path)
    assert back.scores == res.scores and back.per_query["q1"].judgments == res.per_query["q1"].judgments
    assert back.config["judge"] == {"name": "exact"} and back.config["matching"] == "first_match"
