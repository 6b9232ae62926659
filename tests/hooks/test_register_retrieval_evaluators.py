"""Hook register_retrieval_evaluators: the built-in `retrieval` type and a plugin's own, by name."""

from __future__ import annotations

from typing import Any

from evret_core import EvaluationDataset, Evaluator, QueryExample, create_retrieval_evaluator, hookimpl
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import evaluator_names, retrieval_evaluator_names


class CountingEvaluator:
    """Counts the queries that get any document at all."""

    def __init__(self, retriever: Any, metrics: Any = None) -> None:
        self.retriever = retriever

    def evaluate(self, dataset: EvaluationDataset) -> int:
        return sum(bool(self.retriever.get(q.query_id)) for q in dataset.queries)


class Plugin:
    @hookimpl
    def register_retrieval_evaluators(self, register):  # type: ignore[no-untyped-def]
        register("counting", CountingEvaluator)


def test_register_retrieval_evaluators() -> None:
    register_plugin(Plugin(), name="p")
    assert {"retrieval", "counting"} <= set(retrieval_evaluator_names())
    assert "counting" not in evaluator_names()
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="t", expected_answers=["a"])])
    assert create_retrieval_evaluator("counting", retriever={"q": {"d": 1.0}}).evaluate(dataset) == 1
    assert isinstance(create_retrieval_evaluator("retrieval", retriever={}, metrics=["mrr@1"]), Evaluator)
