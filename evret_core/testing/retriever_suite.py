"""The retriever contract, as tests: a plugin's test class subclasses :class:`RetrieverConformance`."""

from __future__ import annotations

from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.testing.suite import Conformance


class RetrieverConformance(Conformance):
    """Tests every retriever must pass. Override the ``retriever`` fixture and ``queries`` (queries that find
    documents in your retriever's corpus); set ``requires_text = False`` for a retriever that returns ids only."""

    kind = kinds.RETRIEVER

    @pytest.fixture
    def subject(self, retriever: Any) -> Any:
        return retriever

    requires_text: bool = True
    k: int = 3

    @pytest.fixture
    def retriever(self) -> Any:
        raise NotImplementedError("override the `retriever` fixture to return the retriever under test")

    @pytest.fixture
    def queries(self) -> list[str]:
        return ["what is retrieval augmented generation", "how do vector databases work"]

    def test_retrieve_returns_ranked_results(self, retriever: Any, queries: list[str]) -> None:
        results = retriever.retrieve(queries[0], self.k)
        assert isinstance(results, list)
        assert 0 < len(results) <= self.k, "the first query must find documents, and at most k of them"
        assert all(isinstance(r, RetrievalResult) for r in results)
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True), "results must be sorted by score, best first"
        ids = [r.doc_id for r in results]
        assert len(set(ids)) == len(ids), "a document must appear once per ranking"

    def test_results_carry_text(self, retriever: Any, queries: list[str]) -> None:
        if not self.requires_text:
            pytest.skip("this retriever returns ids only")
        for results in retriever.batch_retrieve(queries, self.k):
            for r in results:
                assert isinstance(r.text, str) and r.text, f"{r.doc_id}: metadata['text'] is missing"

    def test_at_most_k(self, retriever: Any, queries: list[str]) -> None:
        for k in (1, 2):
            assert all(len(results) <= k for results in retriever.batch_retrieve(queries, k))

    def test_batch_retrieve_has_one_list_per_query_in_order(self, retriever: Any, queries: list[str]) -> None:
        batch = retriever.batch_retrieve(queries, self.k)
        assert len(batch) == len(queries)
        for query, results in zip(queries, batch, strict=True):
            single = retriever.retrieve(query, self.k)
            assert [r.doc_id for r in results] == [r.doc_id for r in single]
            # float32 embedding retrievers score a query alone and inside a batch ~1e-7 apart (different padding)
            assert [r.score for r in results] == pytest.approx([r.score for r in single], rel=1e-5, abs=1e-6)
        reversed_batch = retriever.batch_retrieve(queries[::-1], self.k)
        assert [[r.doc_id for r in rs] for rs in reversed_batch] == [[r.doc_id for r in rs] for rs in batch][::-1]

    def test_columns_agree_with_results(self, retriever: Any, queries: list[str]) -> None:
        """``batch_retrieve_columns`` (what the evaluator reads) gives the same ids, scores and texts."""
        columns = getattr(retriever, "batch_retrieve_columns", None)
        if columns is None:
            pytest.skip("no batch_retrieve_columns: the evaluator converts batch_retrieve's results")
        got = list(columns(queries, self.k))
        batch = retriever.batch_retrieve(queries, self.k)
        assert len(got) == len(queries)
        for ranked, results in zip(got, batch, strict=True):
            assert [str(d) for d in ranked.ids] == [r.doc_id for r in results]
            assert [float(s) for s in ranked.scores] == pytest.approx([r.score for r in results], rel=1e-5, abs=1e-6)
            if self.requires_text:
                assert ranked.texts is not None and list(ranked.texts) == [r.text for r in results]

    def test_batch_retrieve_of_nothing_is_empty(self, retriever: Any) -> None:
        assert list(retriever.batch_retrieve([], self.k)) == []

    def test_usable_by_the_evaluator(self, retriever: Any, queries: list[str]) -> None:
        from evret_core.evaluation.evaluator import Evaluator

        first = retriever.retrieve(queries[0], self.k)
        dataset = EvaluationDataset(queries=[
            QueryExample(query_id=f"q{i}", query_text=q, relevant_doc_ids=[first[0].doc_id])
            for i, q in enumerate(queries)
        ])
        results = Evaluator(retriever, metrics=[f"hit_rate@{self.k}"]).evaluate(dataset)
        assert results.per_query["q0"].scores[f"hit_rate@{self.k}"] == 1.0
