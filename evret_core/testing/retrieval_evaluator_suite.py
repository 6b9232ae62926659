"""The retrieval evaluator contract, as tests: a plugin's test class subclasses
:class:`RetrievalEvaluatorConformance`.

What ``create_retrieval_evaluator(name, retriever=..., metrics=...)`` callers rely on: ``evaluate(dataset)``
returns :class:`~evret_core.results.evaluation.EvaluationResults` with a result for every query of the dataset, a mean per
metric that is the mean of the per-query values, values within the metrics' ranges, the same results when run
again, a JSON file that reads back the same, and an :class:`~evret_core.contracts.errors.EvretError` for a dataset that is
not one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.testing.suite import Conformance

DOCS = {"d1": "Honey bees communicate with a waggle dance.", "d2": "A queen bee lays up to two thousand eggs a day.",
        "d3": "Beeswax is made by glands of worker bees.", "d4": "Propolis seals gaps in the hive."}


def retriever(query: str, k: int) -> list[dict[str, Any]]:
    """A callable retriever over :data:`DOCS`: documents sharing more words with the query first (ties by id)."""
    words = set(query.lower().split())
    ranked = sorted(DOCS, key=lambda d: (-len(words & set(DOCS[d].lower().split())), d))
    return [{"doc_id": d, "score": float(len(DOCS) - i), "text": DOCS[d]} for i, d in enumerate(ranked[:k])]


DATASET = EvaluationDataset(queries=[
    QueryExample(query_id="q1", query_text="waggle dance of honey bees", relevant_doc_ids=["d1"]),
    QueryExample(query_id="q2", query_text="how many eggs does a queen lay", expected_answers=["two thousand eggs"]),
    QueryExample(query_id="q3", query_text="what seals the hive", relevant_doc_ids=["d4", "d3"]),
    QueryExample(query_id="q4", query_text="who makes beeswax", relevant_doc_ids=["d2"]),
])


class RetrievalEvaluatorConformance(Conformance):
    """Set ``name`` (the registered name) and ``options`` (more factory options); ``metrics`` are asked for."""

    kind = kinds.RETRIEVAL_EVALUATOR

    @pytest.fixture
    def subject(self) -> Any:
        return self.make()

    @pytest.fixture
    def registered_name(self) -> str | None:
        return self.name

    name: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}
    metrics: ClassVar[list[str]] = ["ndcg@3", "recall@3", "mrr"]

    def make(self) -> Any:
        from evret_core.plugins.registry import create_retrieval_evaluator

        if not self.name:
            raise NotImplementedError("set `name` to the registered retrieval evaluator")
        return create_retrieval_evaluator(self.name, retriever=retriever, metrics=list(self.metrics), **self.options)

    @pytest.fixture
    def results(self) -> Any:
        return self.make().evaluate(DATASET)

    def test_a_result_for_every_query(self, results: Any) -> None:
        from evret_core.results.evaluation import EvaluationResults

        assert isinstance(results, EvaluationResults)
        assert sorted(results.per_query) == [q.query_id for q in DATASET.queries]
        assert set(results.scores) == set(results.metrics) and results.metrics

    def test_means_of_the_per_query_values_within_range(self, results: Any) -> None:
        from evret_core.plugins.registry import create_metric

        for metric in results.metrics:
            values = [results.per_query[q].scores[metric] for q in results.per_query]
            low, high = create_metric(metric).value_range or (float("-inf"), float("inf"))
            assert all(low <= v <= high for v in values), metric
            assert results.scores[metric] == pytest.approx(sum(values) / len(values)), metric

    def test_same_results_again(self, results: Any) -> None:
        again = self.make().evaluate(DATASET)
        assert again.scores == results.scores
        assert {q: again.per_query[q].scores for q in again.per_query} == \
            {q: results.per_query[q].scores for q in results.per_query}

    def test_the_json_file_reads_back(self, results: Any, tmp_path: Path) -> None:
        from evret_core.results.evaluation import EvaluationResults

        results.to_json(tmp_path / "results.json")
        read = EvaluationResults.from_json(tmp_path / "results.json")
        assert read.scores == results.scores
        assert {q: read.per_query[q].scores for q in read.per_query} == \
            {q: results.per_query[q].scores for q in results.per_query}

    def test_a_dataset_that_is_not_one_is_an_error(self) -> None:
        with pytest.raises(EvretError):
            self.make().evaluate([{"query_id": "q1"}])
