"""Hook register_metrics: a plugin's metric family is created from NAME@K and used by the evaluator."""

from __future__ import annotations

import numpy as np

from evret_core import (
    EvaluationDataset,
    Evaluator,
    Metric,
    QueryExample,
    RankedBatch,
    create_metric,
    hookimpl,
)
from evret_core.plugins.loading import register_plugin


class Retrieved(Metric):
    family = "retrieved"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return np.minimum(batch.num_ret, self.k or batch.depth).astype(np.float64)


class Plugin:
    @hookimpl
    def register_metrics(self, register):  # type: ignore[no-untyped-def]
        register("retrieved", Retrieved)


def test_register_metrics() -> None:
    register_plugin(Plugin(), name="p")
    assert create_metric("retrieved@2").name == "retrieved@2"
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="t", relevant_doc_ids=["a"])])
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    assert Evaluator(run, metrics=["retrieved@2"]).evaluate(dataset).scores == {"retrieved@2": 2.0}
