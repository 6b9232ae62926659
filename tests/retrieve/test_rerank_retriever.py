"""The ``rerank`` retriever (evret_core/retrieve/rerank_retriever.py): any registered retriever's top ``depth``
candidates reranked by any registered reranker, both built by the component builder (options checked, the dataset
handed to the first stage), usable from an ``eval.toml`` through ``evret evaluate``, rebuilt from its recipe, and
refusing bad options with one error before any index is built."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evret_core import EvaluationDataset, QueryExample, RetrievalResult, Retriever, hookimpl
from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns
from evret_core.plugins.builder import build, rebuild
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.recipes import recipe
from evret_core.plugins.registry import create_retriever

CORPUS = {"a": "bees make wax", "b": "honey is made by bees", "c": "why honey never spoils", "d": "queens lay eggs"}


class CorpusOrder(Retriever):
    """Every document of the dataset's corpus (or :data:`CORPUS`), in corpus order; records each ``k`` asked."""

    name = "corpus-order"
    asked: ClassVar[list[int]] = []
    built: ClassVar[int] = 0

    def __init__(self, dataset: Any = None, prefix: str = "") -> None:
        type(self).built += 1
        corpus = getattr(dataset, "corpus", None)
        self.docs = {d: r["text"] for d, r in corpus.items()} if corpus else dict(CORPUS)
        self.prefix = prefix

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        self.asked.append(k)
        return [[RetrievalResult(doc_id=self.prefix + d, score=float(len(self.docs) - i), metadata={"text": t})
                 for i, (d, t) in enumerate(list(self.docs.items())[:k])] for _ in queries]


class SharedWords(Reranker):
    """The query's words in the candidate's text."""

    name = "shared-words"

    def __init__(self, boost: float = 1.0) -> None:
        self.boost = boost

    def score(self, query: str, candidates: RankedColumns) -> list[float]:
        words = set(query.split())
        texts = () if candidates.texts is None else candidates.texts
        return [self.boost * len(words & set(str(t).split())) for t in texts]


class Plugin:
    @hookimpl
    def register_retrievers(self, register: Any) -> None:
        register("corpus-order", CorpusOrder)

    @hookimpl
    def register_rerankers(self, register: Any) -> None:
        register("shared-words", SharedWords)


@pytest.fixture(autouse=True)
def plugin() -> None:
    register_plugin(Plugin(), name="rerank-parts")
    CorpusOrder.asked.clear()
    CorpusOrder.built = 0


def test_reranks_the_first_stages_depth_candidates_and_cuts_to_k() -> None:
    retriever = create_retriever("rerank", retriever="corpus-order", reranker="shared-words", depth=3)
    assert [(r.doc_id, r.score) for r in retriever.retrieve("why honey spoils", 2)] == [("c", 3.0), ("b", 1.0)]
    assert CorpusOrder.asked == [3]
    # k beyond depth: k candidates are fetched; the fourth, outside depth 3 before, now ranks too
    assert [r.doc_id for r in retriever.retrieve("queens lay eggs", 4)] == ["d", "a", "b", "c"]
    assert CorpusOrder.asked == [3, 4]
    assert retriever.config() == {"name": "rerank", "depth": 3, "retriever": {"name": "corpus-order"},
                                  "reranker": {"name": "shared-words"}}


def test_tables_with_options_and_the_dataset_reach_the_parts() -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="x", relevant_doc_ids=["z"])],
                                corpus={"y": {"text": "nothing here"}, "z": {"text": "x marks the spot"}})
    retriever = build("retriever", "rerank", {"retriever": {"name": "corpus-order", "options": {"prefix": "p-"}},
                                              "reranker": {"name": "shared-words", "options": {"boost": 2.0}}},
                      dataset=dataset)
    assert [(r.doc_id, r.score) for r in retriever.retrieve("x", 5)] == [("p-z", 2.0), ("p-y", 0.0)]
    made = recipe(retriever)
    assert made is not None
    again = rebuild(made)  # what an executor ships to a worker
    assert [r.doc_id for r in again.retrieve("x", 5)] == ["p-z", "p-y"]


@pytest.mark.parametrize(("options", "message"), [
    ({"reranker": "shared-words"}, "option 'retriever' is missing"),
    ({"retriever": "corpus-order"}, "option 'reranker' is missing"),
    ({"retriever": "corpus-order", "reranker": "shared-words", "depth": 0}, "'depth' must be an integer from 1"),
    ({"retriever": "corpus-order", "reranker": "shared-words", "depth": "ten"}, "'depth' must be an integer"),
    ({"retriever": {"name": "corpus-order", "prefix": "p"}, "reranker": "shared-words"},
     r"it has 'prefix' too \(put the retriever's options under 'options'\)"),
    ({"retriever": {"name": "corpus-order", "options": "p"}, "reranker": "shared-words"},
     "'retriever.options' must be a table"),
    ({"retriever": 3, "reranker": "shared-words"}, "option 'retriever' must name a registered retriever"),
    ({"retriever": "run", "reranker": "shared-words"}, "the first stage cannot be 'run'"),
    ({"retriever": "corpus-order", "reranker": "shared-wrds"}, "unknown reranker 'shared-wrds'.*shared-words"),
    ({"retriever": "corpus-order", "reranker": {"name": "shared-words", "options": {"bost": 2}}},
     "reranker 'shared-words'.*did you mean boost"),
])
def test_bad_options_are_one_error_before_the_first_stage_is_built(options: dict[str, Any], message: str) -> None:
    with pytest.raises(EvretError, match=message):
        create_retriever("rerank", **options)
    assert CorpusOrder.built == 0


def test_a_reranker_that_needs_texts_names_the_candidate_without_one() -> None:
    class NoText(CorpusOrder):
        def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
            return [[RetrievalResult(doc_id="a")] for _ in queries]

    class More:
        @hookimpl
        def register_retrievers(self, register: Any) -> None:
            register("no-text", NoText)

    register_plugin(More(), name="no-text-retriever")
    retriever = create_retriever("rerank", retriever="no-text", reranker="shared-words")
    with pytest.raises(EvretError, match="document 'a' of query 'q' has none: give the first stage a corpus"):
        retriever.retrieve("q", 3)


def test_evret_evaluate_reads_a_rerank_retriever_from_eval_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("data.jsonl").write_text(json.dumps({"query_id": "q1", "query": "why honey spoils",
                                              "relevant_doc_ids": ["c"]}) + "\n", encoding="utf-8")
    Path("eval.toml").write_text(
        'dataset = "data.jsonl"\nmetrics = ["mrr@3"]\noutput = "out.json"\n'
        '[retriever]\nname = "rerank"\ndepth = 4\nretriever = { name = "corpus-order" }\n'
        'reranker = { name = "shared-words", options = { boost = 0.5 } }\n', encoding="utf-8")
    assert main(["evaluate", "--config", "eval.toml"]) == 0
    assert "mrr@3   1.000 [1.000, 1.000]" in capsys.readouterr().out
    config = json.loads(Path("out.json").read_text(encoding="utf-8"))["config"]["retriever"]
    assert config == {"name": "rerank", "depth": 4, "retriever": {"name": "corpus-order"},
                      "reranker": {"name": "shared-words"}}
    Path("eval.toml").write_text('dataset = "data.jsonl"\nmetrics = ["mrr@3"]\n[retriever]\nname = "rerank"\n'
                                 'retriever = "corpus-order"\nreranker = "nope"\n', encoding="utf-8")
    assert main(["evaluate", "--config", "eval.toml"]) == 2
    assert "unknown reranker 'nope'" in capsys.readouterr().err
