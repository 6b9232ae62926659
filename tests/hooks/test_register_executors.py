"""Hook register_executors: an executor registered by a plugin runs the stages, by name, with the same scores."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, create_executor, hookimpl
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor, JudgeRun
from evret_core.contracts.metric import Metric, RankedBatch
from evret_core.evaluation.executors import LocalExecutor
from evret_core.plugins.loading import register_plugin


class Counting(Executor):
    """Runs in-process like ``local`` but counts each stage's calls."""

    name = "counting"

    def __init__(self, label: str = "x") -> None:
        self.label = label
        self.calls: dict[str, int] = {"retrieve": 0, "judge": 0, "metrics": 0}

    def retrieve(self, retriever: Any, batches: Sequence[list[str]], k: int, progress: Any) -> list[list[Any]]:
        self.calls["retrieve"] += len(batches)
        return super().retrieve(retriever, batches, k, progress)

    def judge(self, judge: Any, contexts: Any, batch_size: int, progress: Any) -> JudgeRun:
        self.calls["judge"] += 1
        return super().judge(judge, contexts, batch_size, progress)

    def metrics(self, metrics: Sequence[Metric], batches: Iterable[RankedBatch]) -> dict[str, np.ndarray]:
        self.calls["metrics"] += 1
        return super().metrics(metrics, batches)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label}


class Plugin:
    @hookimpl
    def register_executors(self, register):  # type: ignore[no-untyped-def]
        register("counting", Counting)


DOCS = {"d1": "paris is the capital of france", "d2": "berlin is in germany", "d3": "rome is old"}


def retriever(query: str, k: int) -> list[dict[str, Any]]:
    order = sorted(DOCS, key=lambda d: -len(set(query.split()) & set(DOCS[d].split())))
    return [{"doc_id": d, "text": DOCS[d]} for d in order[:k]]


DATASET = EvaluationDataset(queries=[
    QueryExample(query_id="q1", query_text="capital of france", expected_answers=["paris is the capital"]),
    QueryExample(query_id="q2", query_text="germany city", relevant_doc_ids=["d2"]),
    QueryExample(query_id="q3", query_text="old rome", expected_answers=["rome is old", "berlin"]),
])


def test_register_executors() -> None:
    register_plugin(Plugin(), name="p")
    made = create_executor("counting", label="y")
    assert isinstance(made, Counting) and made.label == "y"
    local = Evaluator(retriever, metrics=["ndcg@3", "recall@3"], k=3, batch_size=2).evaluate(DATASET)
    evaluator = Evaluator(retriever, metrics=["ndcg@3", "recall@3"], k=3, batch_size=2, executor="counting",
                          executor_options={"label": "z"})
    results = evaluator.evaluate(DATASET)
    assert isinstance(evaluator.executor, Counting)
    assert evaluator.executor.calls == {"retrieve": 2, "judge": 1, "metrics": 1}
    assert results.scores == local.scores
    assert {q: r.scores for q, r in results.per_query.items()} == {q: r.scores for q, r in local.per_query.items()}
    assert results.config["executor"] == {"name": "counting", "label": "z"}
    assert local.config["executor"] == {"name": "local"}
    assert results.manifest is not None and results.manifest.executor == {"name": "counting", "label": "z"}
    assert {k: v for k, v in results.config.items() if k != "executor"} == {
        k: v for k, v in local.config.items() if k != "executor"}


def test_default_executor_is_local_and_bad_names_are_errors() -> None:
    assert isinstance(Evaluator(retriever, metrics=["mrr"]).executor, LocalExecutor)
    with pytest.raises(EvretError, match="executor 'nope'"):
        Evaluator(retriever, metrics=["mrr"], executor="nope")
    with pytest.raises(EvretError, match="executor_options apply"):
        Evaluator(retriever, metrics=["mrr"], executor=LocalExecutor(), executor_options={"a": 1})
    with pytest.raises(EvretError, match="bad options"):
        Evaluator(retriever, metrics=["mrr"], executor="local", executor_options={"workers": 2})
