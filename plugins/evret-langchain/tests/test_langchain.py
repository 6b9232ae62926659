"""evret-langchain against langchain-core's real InMemoryVectorStore and hand-written retrievers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest
from evret_langchain import LangChainRetriever
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.retrieve.retrievers import resolve_retriever
from evret_core.testing import RetrieverConformance

TEXTS = {
    "d1": "Honey bees communicate the direction of food with a waggle dance.",
    "d2": "Bumblebees can fly at low temperatures by shivering their flight muscles.",
    "d3": "A queen bee can lay up to two thousand eggs in a single day.",
    "d4": "Drones are male bees whose main role is to mate with a queen.",
    "d5": "Beeswax is produced by glands on the abdomen of worker bees.",
    "d6": "Propolis is a resin mixture that bees use to seal gaps in the hive.",
}


def make_store() -> InMemoryVectorStore:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(
        [Document(page_content=t, metadata={"source": "bees", "doc_id": i}) for i, t in TEXTS.items()],
        ids=list(TEXTS),
    )
    return store


def id_dataset() -> EvaluationDataset:
    # DeterministicFakeEmbedding hashes the text: a query equal to a document's text finds it at rank 1
    return EvaluationDataset(
        queries=[QueryExample(query_id=f"q{i}", query_text=t, relevant_doc_ids=[i]) for i, t in TEXTS.items()]
    )


class ListRetriever(BaseRetriever):
    """A hand-written retriever: returns every document in a fixed order, rotated by the query's length."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        shift = len(query) % len(self.docs)
        return self.docs[shift:] + self.docs[:shift]


class TopKRetriever(BaseRetriever):
    """A hand-written retriever with a ``k`` field, as many LangChain retrievers have."""

    docs: list[Document]
    k: int = 2
    seen_k: list[int] = []

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.seen_k.append(self.k)
        return self.docs[: self.k]


class SlowAsyncRetriever(BaseRetriever):
    """Counts how many queries are in flight at once."""

    docs: list[Document]
    state: dict[str, int] = {}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        raise AssertionError("the async path must be used")

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.state["now"] = self.state.get("now", 0) + 1
        self.state["max"] = max(self.state.get("max", 0), self.state["now"])
        await asyncio.sleep(0.02)
        self.state["now"] -= 1
        return self.docs[:1]


def docs_with_ids() -> list[Document]:
    return [Document(id=i, page_content=t, metadata={"n": n}) for n, (i, t) in enumerate(TEXTS.items())]


# -- the retriever contract ------------------------------------------------------------------------------------
class TestVectorStoreConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self) -> LangChainRetriever:
        return LangChainRetriever(make_store())

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(TEXTS.values())[:4]


class TestHandWrittenRetrieverConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self) -> LangChainRetriever:
        return LangChainRetriever(ListRetriever(docs=docs_with_ids()))

    @pytest.fixture
    def queries(self) -> list[str]:
        return ["a", "bb", "ccc"]


class TestAdaptedStore:
    """Beyond the contract: texts, order and scores of the adapted vector store."""

    @pytest.fixture
    def retriever(self) -> LangChainRetriever:
        return LangChainRetriever(make_store())

    def test_batch_shape_order_and_cut(self, retriever: LangChainRetriever) -> None:
        queries = list(TEXTS.values())[:4]
        batch = retriever.batch_retrieve(queries, 3)
        assert len(batch) == 4
        for query, results in zip(queries, batch, strict=True):
            assert 0 < len(results) <= 3
            assert len({r.doc_id for r in results}) == len(results)
            assert all(isinstance(r.text, str) and r.text for r in results)
            assert results[0].text == query
        assert retriever.retrieve(queries[1], 3) == batch[1]
        assert retriever.batch_retrieve([], 3) == []

    def test_scores_come_from_the_store_and_descend(self, retriever: LangChainRetriever) -> None:
        results = retriever.retrieve(TEXTS["d3"], 6)
        assert results[0].doc_id == "d3"
        assert results[0].score == pytest.approx(1.0)  # cosine similarity of identical embeddings
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True) and scores[-1] < 1.0
        assert retriever.config()["scores"] == "store"


# -- adaptation through the core -------------------------------------------------------------------------------
def test_evaluator_accepts_as_retriever_directly() -> None:
    store = make_store()
    results = Evaluator(retriever=store.as_retriever(), metrics=["recall@1", "ndcg@3"]).evaluate(id_dataset())
    assert results.scores == {"recall@1": 1.0, "ndcg@3": 1.0}
    assert results.config["retriever"]["name"] == "langchain"
    assert results.config["retriever"]["wraps"].endswith("InMemoryVectorStore")


def test_evaluator_accepts_a_vector_store_directly() -> None:
    results = Evaluator(retriever=make_store(), metrics=["mrr"], k=5).evaluate(id_dataset())
    assert results.scores["mrr"] == 1.0
    first = results.per_query["qd2"].judgments[0]
    assert first.doc_id == "d2" and first.text == TEXTS["d2"]


def test_text_labelled_dataset_is_judged_on_page_content() -> None:
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text=TEXTS["d5"], expected_answers=[TEXTS["d5"]]),
        QueryExample(query_id="b", query_text=TEXTS["d6"], expected_answers=["no document says this"]),
    ])
    results = Evaluator(retriever=make_store().as_retriever(), metrics=["recall@2"], judge="exact").evaluate(dataset)
    assert results.per_query["a"].scores["recall@2"] == 1.0
    assert results.per_query["b"].scores["recall@2"] == 0.0


def test_foreign_objects_are_left_to_other_adapters() -> None:
    class NotLangChain:
        pass

    with pytest.raises(EvretError, match="cannot use NotLangChain as a retriever"):
        resolve_retriever(NotLangChain())


def test_plugin_load_and_foreign_adapt_do_not_import_langchain() -> None:
    code = textwrap.dedent(
        """
        import sys
        from evret_core.plugins.loading import get_registry
        reg = get_registry()
        assert "langchain" in reg.names("retriever"), reg.names("retriever")
        assert reg.adapt(object()) is None
        assert "langchain_core" not in sys.modules, "langchain_core imported at plugin load"
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- k, search_kwargs and metadata -----------------------------------------------------------------------------
def test_k_overrides_search_kwargs_and_filters_pass_through() -> None:
    store = make_store()
    wrapped = LangChainRetriever(store.as_retriever(search_kwargs={"k": 1, "filter": lambda d: d.id != "d1"}))
    results = wrapped.retrieve(TEXTS["d1"], 4)
    assert len(results) == 4  # k=4 from Evret, not the retriever's k=1
    assert "d1" not in {r.doc_id for r in results}  # the filter still applies


def test_k_reaches_a_non_similarity_vectorstore_retriever() -> None:
    store = make_store()
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 1, "fetch_k": 6})
    wrapped = LangChainRetriever(mmr)
    assert len(wrapped.retrieve(TEXTS["d4"], 3)) == 3
    assert wrapped.retrieve(TEXTS["d4"], 3)[0].doc_id == "d4"


def test_k_field_is_set_on_a_copy() -> None:
    original = TopKRetriever(docs=docs_with_ids(), seen_k=[])
    wrapped = LangChainRetriever(original)
    assert [r.doc_id for r in wrapped.retrieve("anything", 5)] == ["d1", "d2", "d3", "d4", "d5"]
    assert original.k == 2 and original.seen_k == [5]


def test_results_are_cut_to_k_when_the_retriever_cannot_take_it() -> None:
    wrapped = LangChainRetriever(ListRetriever(docs=docs_with_ids()))
    batch = wrapped.batch_retrieve(["abc", "abcd"], 2)
    assert [[r.doc_id for r in rs] for rs in batch] == [["d4", "d5"], ["d5", "d6"]]
    assert [r.score for r in batch[0]] == [2.0, 1.0]  # rank scores keep the order when LangChain has none
    assert batch[0][0].metadata == {"n": 3, "text": TEXTS["d4"]}


def test_ids_from_a_metadata_key() -> None:
    docs = [Document(page_content=t, metadata={"doc_id": i, "source": "x"}) for i, t in TEXTS.items()]
    wrapped = LangChainRetriever(ListRetriever(docs=docs), id_key="doc_id")
    result = wrapped.retrieve("", 1)[0]
    assert result.doc_id == "d1" and result.metadata["source"] == "x" and result.text == TEXTS["d1"]


def test_missing_ids_are_a_clear_error() -> None:
    docs = [Document(page_content=t, metadata={"source": "x"}) for t in TEXTS.values()]
    with pytest.raises(EvretError, match=r"no Document.id; set option 'id_key'.*\['source'\]"):
        LangChainRetriever(ListRetriever(docs=docs)).retrieve("q", 3)
    with pytest.raises(EvretError, match=r"no metadata key 'doc_id' \(option 'id_key'\)"):
        LangChainRetriever(ListRetriever(docs=docs), id_key="doc_id").retrieve("q", 3)


def test_columns_rank_as_the_results_do() -> None:
    """batch_retrieve_columns (the evaluator's path, no result objects) gives batch_retrieve's ids, scores and
    texts, the id_key and the missing-id error included; also from inside a running event loop."""
    docs = [Document(page_content=t, metadata={"doc_id": i.upper()}) for i, t in TEXTS.items()]
    wrapped = LangChainRetriever(ListRetriever(docs=docs), id_key="doc_id", max_concurrency=2)

    async def inside_a_loop() -> list[object]:
        return list(wrapped.batch_retrieve_columns(["", "ab"], 3))

    columns = asyncio.run(inside_a_loop())
    assert [list(c.ids) for c in columns] == [["D1", "D2", "D3"], ["D3", "D4", "D5"]]  # type: ignore[attr-defined]
    assert [c.scores.tolist() for c in columns] == [[3.0, 2.0, 1.0]] * 2  # type: ignore[attr-defined]
    assert list(columns[1].texts) == [TEXTS["d3"], TEXTS["d4"], TEXTS["d5"]]  # type: ignore[attr-defined]
    assert [[r.doc_id for r in rs] for rs in wrapped.batch_retrieve(["", "ab"], 3)] == [
        list(c.ids) for c in columns]  # type: ignore[attr-defined]
    with pytest.raises(EvretError, match=r"no metadata key 'nope' \(option 'id_key'\)"):
        LangChainRetriever(ListRetriever(docs=docs), id_key="nope").batch_retrieve_columns(["q"], 3)
    assert wrapped.batch_retrieve_columns([], 3) == []


def test_abatch_runs_with_bounded_concurrency() -> None:
    retriever = SlowAsyncRetriever(docs=docs_with_ids(), state={})
    wrapped = LangChainRetriever(retriever, max_concurrency=3)
    batch = wrapped.batch_retrieve([f"query {i}" for i in range(12)], 5)
    assert len(batch) == 12 and all(rs[0].doc_id == "d1" for rs in batch)
    assert retriever.state["max"] == 3


def test_bounded_concurrency_on_a_vector_store() -> None:
    store = make_store()
    state = {"now": 0, "max": 0}
    original = store.asimilarity_search_with_score

    async def counting(query: str, k: int = 4, **kwargs: object) -> list[tuple[Document, float]]:
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        return await original(query, k=k, **kwargs)

    object.__setattr__(store, "asimilarity_search_with_score", counting)
    LangChainRetriever(store, max_concurrency=2).batch_retrieve(list(TEXTS.values()), 2)
    assert state["max"] == 2


def test_works_inside_a_running_event_loop() -> None:
    async def main() -> tuple[list[str], list[list[str]]]:
        wrapped = LangChainRetriever(make_store())
        sync_ids = [r.doc_id for r in wrapped.retrieve(TEXTS["d6"], 1)]
        native = await wrapped.abatch_retrieve([TEXTS["d1"], TEXTS["d2"]], 1)
        return sync_ids, [[r.doc_id for r in rs] for rs in native]

    assert asyncio.run(main()) == (["d6"], [["d1"], ["d2"]])


def test_bad_objects_and_options() -> None:
    with pytest.raises(EvretError, match="expected a LangChain BaseRetriever or VectorStore, got int"):
        LangChainRetriever(3)
    with pytest.raises(EvretError, match="'max_concurrency' must be at least 1"):
        LangChainRetriever(make_store(), max_concurrency=0)


def test_registered_name_imports_an_object(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "my_rag.py").write_text(textwrap.dedent(
        """
        from langchain_core.documents import Document
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.vectorstores import InMemoryVectorStore

        def build():
            store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
            store.add_documents([Document(page_content="alpha", id="a"), Document(page_content="beta", id="b")])
            return store.as_retriever()
        """
    ))
    monkeypatch.syspath_prepend(str(tmp_path))
    retriever = create_retriever("langchain", object="my_rag:build", max_concurrency=2)
    assert [r.doc_id for r in retriever.retrieve("beta", 1)] == ["b"]
    with pytest.raises(EvretError, match="write it as 'package.module:attribute'"):
        create_retriever("langchain", object="my_rag")
    with pytest.raises(EvretError, match="'my_rag' has no 'nope'"):
        create_retriever("langchain", object="my_rag:nope")
