"""Hook register_retrievers: created by name; the component builder hands `dataset` to factories that accept it."""

from __future__ import annotations

from typing import Any

from evret_core import EvaluationDataset, QueryExample, RetrievalResult, Retriever, create_retriever, hookimpl
from evret_core.plugins.builder import build
from evret_core.plugins.loading import register_plugin


class CorpusRetriever(Retriever):
    def __init__(self, dataset: Any = None, boost: float = 1.0) -> None:
        self.corpus = dict(dataset.corpus) if dataset is not None else {}
        self.boost = boost

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return [RetrievalResult(doc_id=d, score=self.boost, metadata=r) for d, r in list(self.corpus.items())[:k]]


class Plugin:
    @hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register("from-corpus", CorpusRetriever)


def test_register_retrievers() -> None:
    register_plugin(Plugin(), name="p")
    assert create_retriever("from-corpus", boost=2.0).boost == 2.0
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="t", relevant_doc_ids=["a"])],
                                corpus={"a": {"text": "alpha"}})
    retriever = build("retriever", "from-corpus", {}, dataset=dataset)
    assert [r.text for r in retriever.retrieve("t", 5)] == ["alpha"]
