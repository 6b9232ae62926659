"""Hook register_rerankers: a reranker registered by a plugin is created by name (its options checked by the
component builder), listed by ``evret plugins``, and used by the built-in ``rerank`` retriever inside an evaluation,
where it changes the order the metrics see."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, RetrievalResult, Retriever, hookimpl
from evret_core.cli import plugins_cmd
from evret_core.contracts.errors import EvretError
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import create_reranker, create_retriever, reranker_names

DOCS = {"d1": "bees make wax", "d2": "honey is sweet", "d3": "why honey never spoils"}


class Alphabetical(Retriever):
    """A first stage that returns every document, by id."""

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return [RetrievalResult(doc_id=d, score=float(len(DOCS) - i), metadata={"text": DOCS[d]})
                for i, d in enumerate(sorted(DOCS)[:k])]


class LongestText(Reranker):
    """Scores a candidate by its text's length (times ``weight``)."""

    name = "longest"

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = weight

    def score(self, query: str, candidates: RankedColumns) -> list[float]:
        return [self.weight * len(str(t)) for t in (() if candidates.texts is None else candidates.texts)]


class Plugin:
    @hookimpl
    def register_rerankers(self, register: Any) -> None:
        register("longest", LongestText)

    @hookimpl
    def register_retrievers(self, register: Any) -> None:
        register("alphabetical", Alphabetical)


@pytest.fixture(autouse=True)
def plugin() -> None:
    register_plugin(Plugin(), name="rerank-plugin")


def test_register_rerankers_by_name_with_options_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert "longest" in reranker_names()
    assert create_reranker("longest", weight=2.0).weight == 2.0  # type: ignore[attr-defined]
    with pytest.raises(EvretError, match=r"did you mean weight\?"):
        create_reranker("longest", wieght=2.0)
    assert plugins_cmd.run(argparse.Namespace(all=False, json=False)) == 0
    assert "rerank-plugin\n" in (out := capsys.readouterr().out) and "rerankers: longest" in out


def test_a_registered_reranker_reorders_what_the_evaluator_scores() -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="honey", relevant_doc_ids=["d3"])])
    plain = Evaluator(create_retriever("alphabetical"), metrics=["mrr@3"]).evaluate(dataset)
    reranked = Evaluator(create_retriever("rerank", retriever="alphabetical", reranker="longest", depth=3),
                         metrics=["mrr@3"]).evaluate(dataset)
    assert plain.scores == {"mrr@3": 1 / 3} and reranked.scores == {"mrr@3": 1.0}
    assert reranked.config["retriever"]["reranker"] == {"name": "longest"}
