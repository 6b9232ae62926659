"""The reranker contract, as tests: a reranker plugin's test class subclasses :class:`RerankerConformance`."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult
from evret_core.testing.suite import Conformance

Candidates = list[RetrievalResult]

CANDIDATES: dict[str, list[tuple[str, str]]] = {
    "what do bees make": [
        ("d1", "The stock market closed higher on Tuesday."),
        ("d2", "Bees make honey and wax in the hive."),
        ("d3", "Football is popular in Brazil."),
        ("d4", "Honey bees make honey from the nectar of flowers."),
        ("d5", "Photosynthesis converts light into chemical energy."),
    ],
    "how tall is the eiffel tower": [
        ("e1", "The Eiffel Tower is 330 metres tall."),
        ("e2", "Spiders have eight legs."),
        ("e3", "The Eiffel Tower stands in Paris, France."),
        ("e4", "Water boils at 100 degrees Celsius at sea level."),
    ],
    "why does honey not spoil": [
        ("h1", "Rome is the capital of Italy."),
        ("h2", "Honey never spoils: its low water content stops bacteria from growing."),
        ("h3", "Chess is played on a board of 64 squares."),
    ],
}
"""The suite's default candidates: per query, a first-stage list (best first) with relevant and unrelated texts."""


def first_stage(pairs: list[tuple[str, str]]) -> Candidates:
    """``(doc_id, text)`` pairs as a first stage returns them: best first, scores n down to 1, texts in metadata."""
    n = len(pairs)
    return [RetrievalResult(doc_id=doc_id, score=float(n - i), metadata={"text": text})
            for i, (doc_id, text) in enumerate(pairs)]


class RerankerConformance(Conformance):
    """Tests every reranker must pass. Override the ``reranker`` fixture (and, when your reranker needs other
    texts, ``candidates``: query -> its first-stage results, best first, with texts). ``tolerance`` is the relative
    difference allowed between the scores of one pair scored alone and inside a batch (float32 models pad batches
    differently)."""

    kind = kinds.RERANKER

    tolerance: float = 1e-5

    @pytest.fixture
    def subject(self, reranker: Any) -> Any:
        return reranker

    @pytest.fixture
    def reranker(self) -> Any:
        raise NotImplementedError("override the `reranker` fixture to return the reranker under test")

    @pytest.fixture
    def candidates(self) -> dict[str, Candidates]:
        return {query: first_stage(pairs) for query, pairs in CANDIDATES.items()}

    def _approx(self, values: list[float]) -> Any:
        return pytest.approx(values, rel=self.tolerance, abs=self.tolerance)

    def test_keeps_exactly_the_candidates(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        for query, given in candidates.items():
            ids = [r.doc_id for r in given]
            everything = reranker.rerank(query, given, len(given))
            assert sorted(r.doc_id for r in everything) == sorted(ids), "every candidate once, no new id"
            for k in (1, 2):
                top = reranker.rerank(query, given, k)
                assert [r.doc_id for r in top] == [r.doc_id for r in everything][:k], \
                    "the top k are the first k of the whole reranking"

    def test_ordered_by_its_own_score(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        for query, given in candidates.items():
            ranked = reranker.rerank(query, given, len(given))
            scores = [r.score for r in ranked]
            assert scores == sorted(scores, reverse=True), "results must be sorted by the reranker's score"
            own = dict(zip((r.doc_id for r in given), reranker.score(query, RankedColumns.from_results(given)),
                           strict=True))
            assert scores == self._approx([float(own[r.doc_id]) for r in ranked]), \
                "each result's score must be the reranker's score of that candidate"
            texts = {r.doc_id: r.text for r in given}
            assert all(r.text == texts[r.doc_id] for r in ranked), "each result keeps its candidate's text"

    def test_deterministic(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        for query, given in candidates.items():
            first = reranker.rerank(query, given, len(given))
            again = reranker.rerank(query, given, len(given))
            assert [r.doc_id for r in again] == [r.doc_id for r in first]
            assert [r.score for r in again] == self._approx([r.score for r in first])

    def test_ties_keep_the_first_stage_order(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        """Two candidates with the same text score alike; when their scores are equal, the one the first stage
        ranked higher comes first."""
        query, given = next(iter(candidates.items()))
        twin = RetrievalResult(doc_id=f"{given[0].doc_id}-twin", score=given[-1].score - 1,
                               metadata={"text": given[0].text})
        for listed in ([*given, twin], [twin, *given]):
            ranked = reranker.rerank(query, listed, len(listed))
            by_id = {r.doc_id: r for r in ranked}
            original, copy = by_id[given[0].doc_id], by_id[twin.doc_id]
            assert copy.score == pytest.approx(original.score, rel=self.tolerance, abs=self.tolerance)
            if copy.score == original.score:
                order = [r.doc_id for r in ranked]
                first = listed[0].doc_id
                second = twin.doc_id if first == given[0].doc_id else given[0].doc_id
                assert order.index(first) < order.index(second), "a tie keeps the first stage's order"

    def test_no_candidates_nothing_back(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        query, given = next(iter(candidates.items()))
        assert reranker.rerank(query, [], 3) == []
        assert reranker.batch_rerank([], [], 3) == []
        batch = reranker.batch_rerank([query, "a query with no candidates"], [given, []], 3)
        assert len(batch) == 2 and batch[1] == [] and len(batch[0]) == min(3, len(given))

    def test_k_larger_than_the_candidates(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        for query, given in candidates.items():
            ranked = reranker.rerank(query, given, len(given) + 10)
            assert len(ranked) == len(given)
            assert [r.doc_id for r in ranked] == [r.doc_id for r in reranker.rerank(query, given, len(given))]

    def test_batch_is_one_at_a_time(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        queries = list(candidates)
        batch = reranker.batch_rerank(queries, [candidates[q] for q in queries], 3)
        assert len(batch) == len(queries)
        for query, ranked in zip(queries, batch, strict=True):
            alone = reranker.rerank(query, candidates[query], 3)
            assert [r.doc_id for r in ranked] == [r.doc_id for r in alone]
            assert [r.score for r in ranked] == self._approx([r.score for r in alone])
        backwards = reranker.batch_rerank(queries[::-1], [candidates[q] for q in queries[::-1]], 3)
        assert [[r.doc_id for r in rs] for rs in backwards] == [[r.doc_id for r in rs] for rs in batch][::-1]

    def test_columns_agree_with_results(self, reranker: Any, candidates: dict[str, Candidates]) -> None:
        """``batch_rerank_columns`` (what the ``rerank`` retriever calls) ranks as ``batch_rerank`` does, on
        columns as the array retrievers give them (numpy object arrays of ids and texts, float32 scores)."""
        queries = list(candidates)
        def arrays(results: Candidates) -> RankedColumns:
            ids: Any = np.array([r.doc_id for r in results], dtype=object)
            texts: Any = np.array([r.text for r in results], dtype=object)
            return RankedColumns(ids, np.array([r.score for r in results], dtype=np.float32), texts)

        columns = [arrays(candidates[q]) for q in queries]
        reranked = reranker.batch_rerank_columns(queries, columns, 3)
        objects = reranker.batch_rerank(queries, [candidates[q] for q in queries], 3)
        for ranked, results in zip(reranked, objects, strict=True):
            assert isinstance(ranked, RankedColumns)
            assert [str(d) for d in ranked.ids] == [r.doc_id for r in results]
            assert [float(s) for s in ranked.scores] == self._approx([r.score for r in results])
            assert ranked.texts is not None and list(ranked.texts) == [r.text for r in results]

    def test_bad_candidates_are_refused_before_scoring(self, reranker: Any,
                                                       candidates: dict[str, Candidates]) -> None:
        query, given = next(iter(candidates.items()))
        with pytest.raises(EvretError, match="twice"):
            reranker.rerank(query, [*given, given[0]], 3)
        if getattr(reranker, "requires_text", True):
            with pytest.raises(EvretError, match="has none"):
                reranker.rerank(query, [*given, RetrievalResult(doc_id="no-text")], 3)

    def test_config_and_stats(self, reranker: Any) -> None:
        config = reranker.config()
        assert isinstance(config, dict) and config.get("name") == reranker.name
        assert isinstance(reranker.stats(), dict)
