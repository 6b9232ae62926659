"""evret-chroma against chromadb's ephemeral and persistent clients, telemetry off."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from evret_chroma import ChromaRetriever, index_corpus
from evret_chroma.retriever import make_client

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import (
    BEE_DOCS,
    BEE_QUERIES,
    assert_plugin_load_leaves_unimported,
    hashed_embedder,
    write_corpus,
)

DOCS = BEE_DOCS
embed = hashed_embedder(128)


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def collection(corpus_file: Path) -> tuple[object, str]:
    client = make_client()
    name = f"bees-{uuid.uuid4().hex[:8]}"  # ephemeral clients share one in-process store
    assert index_corpus(client, name, corpus_file, embed, batch_size=4) == 6
    return client, name


class TestConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, collection: tuple[object, str]) -> ChromaRetriever:
        return ChromaRetriever(collection[1], embedding=embed, client=collection[0])

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


class TestRanking:
    """Beyond the contract: the expected documents come first, in batches smaller than the query list."""

    def test_batch_shape_order_and_cut(self, collection: tuple[object, str]) -> None:
        client, name = collection
        retriever = ChromaRetriever(name, embedding=embed, client=client, batch_size=2)
        queries = list(BEE_QUERIES)
        batch = retriever.batch_retrieve(queries, 3)
        assert [rs[0].doc_id for rs in batch] == ["d1", "d3", "d5", "d6"]
        for results in batch:
            assert len(results) == 3 and len({r.doc_id for r in results}) == 3
            assert all(r.text for r in results)
            scores = [r.score for r in results]
            assert scores == sorted(scores, reverse=True)
        assert retriever.retrieve(queries[2], 3) == batch[2]
        assert retriever.batch_retrieve([], 3) == []


def test_texts_ids_metadata_and_distances(collection: tuple[object, str]) -> None:
    client, name = collection
    top = ChromaRetriever(name, embedding=embed, client=client).retrieve("drones mate", 1)[0]
    assert top.doc_id == "d4"
    assert top.text == "Drones Drones are male bees whose main role is to mate with a queen."
    assert top.metadata["topic"] == "hive" and top.metadata["title"] == "Drones"
    assert top.score == pytest.approx(-top.metadata["distance"]) and 0 <= top.metadata["distance"] < 1


def test_results_are_the_columns_with_chromas_metadata(collection: tuple[object, str]) -> None:
    """The object path is the columns path plus metadata: the same ids, scores (exactly) and texts in the same
    order, each result's metadata Chroma's own for the document, then ``text`` and ``distance``."""
    client, name = collection
    retriever = ChromaRetriever(name, embedding=embed, client=client, batch_size=3)
    queries = list(BEE_QUERIES)
    results = retriever.batch_retrieve(queries, 4)
    columns = retriever.batch_retrieve_columns(queries, 4)
    assert [[(r.doc_id, r.score, r.text) for r in rs] for rs in results] == [
        [(r.doc_id, r.score, r.text) for r in c.to_results()] for c in columns]
    direct = client.get_collection(name).query(query_embeddings=embed(queries), n_results=4,  # type: ignore[attr-defined]
                                               include=["documents", "metadatas", "distances"])
    for rs, metas, documents, distances in zip(results, direct["metadatas"], direct["documents"],
                                               direct["distances"], strict=True):
        # Chroma's own keys come in no fixed order (a hash map on its side); the text and the distance come last
        assert [r.metadata for r in rs] == [{**meta, "text": document, "distance": float(distance)}
                                            for meta, document, distance in zip(metas, documents, distances,
                                                                                strict=True)]
        assert all(list(r.metadata)[-2:] == ["text", "distance"] for r in rs)
        assert all(type(r.doc_id) is str and type(r.score) is float and type(r.metadata) is dict for r in rs)


class RecordingCollection:
    """A real Chroma collection that notes what each query asks Chroma to include."""

    def __init__(self, inner: object) -> None:
        self.inner, self.asked = inner, []  # type: list[list[str]]

    def query(self, **kwargs: object) -> object:
        self.asked.append(list(kwargs["include"]))  # type: ignore[call-overload]
        return self.inner.query(**kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_columns_leave_the_metadata_in_chroma(collection: tuple[object, str]) -> None:
    """The evaluator's path asks for documents and distances only; batch_retrieve asks for the metadatas too."""
    client, name = collection
    retriever = ChromaRetriever(name, embedding=embed, client=client)
    recording = retriever.collection = RecordingCollection(retriever.collection)  # type: ignore[assignment]
    columns = retriever.batch_retrieve_columns(list(BEE_QUERIES), 3)
    results = retriever.batch_retrieve(list(BEE_QUERIES), 3)
    assert recording.asked == [["documents", "distances"], ["documents", "metadatas", "distances"]]
    assert [list(c.ids) for c in columns] == [[r.doc_id for r in rs] for rs in results]
    assert [list(c.texts or []) for c in columns] == [[r.text for r in rs] for rs in results]
    assert results[0][0].metadata["topic"] == "behaviour"


def test_where_filters_pass_through(collection: tuple[object, str]) -> None:
    client, name = collection
    retriever = ChromaRetriever(name, embedding=embed, client=client, where={"topic": "hive"})
    assert {r.doc_id for r in retriever.retrieve("waggle dance direction", 5)} == {"d3", "d4"}
    by_text = ChromaRetriever(name, embedding=embed, client=client, where_document={"$contains": "resin"})
    assert [r.doc_id for r in by_text.retrieve("waggle dance", 5)] == ["d6"]


def test_precomputed_query_embeddings(collection: tuple[object, str]) -> None:
    client, name = collection
    queries = ["which bees communicate food direction", "beeswax glands on the abdomen"]
    retriever = ChromaRetriever(name, query_embeddings=dict(zip(queries, embed(queries), strict=True)), client=client)
    assert [rs[0].doc_id for rs in retriever.batch_retrieve(queries, 2)] == ["d1", "d5"]
    with pytest.raises(EvretError, match=r"'query_embeddings' has no vector for the query 'unknown'"):
        retriever.retrieve("unknown", 2)


def test_persistent_collection_through_the_registry(corpus_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "chroma"
    index_corpus(make_client(path=str(store)), "bees", corpus_file, embed)
    retriever = create_retriever("chroma", collection="bees", path=str(store), embedding=embed)
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="which bees communicate food direction", relevant_doc_ids=["d1"]),
        QueryExample(query_id="b", query_text="beeswax glands on the abdomen", relevant_doc_ids=["d5"]),
    ])
    results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"]).evaluate(dataset)
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["collection"] == "bees"


def test_langchain_embeddings_are_accepted() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    client = make_client()
    name = f"fake-{uuid.uuid4().hex[:8]}"
    fake = DeterministicFakeEmbedding(size=32)
    index_corpus(client, name, [{"doc_id": d["_id"], "text": d["text"]} for d in DOCS], fake)
    results = ChromaRetriever(name, embedding=fake, client=client).retrieve(DOCS[2]["text"], 2)
    assert results[0].doc_id == "d3" and results[0].metadata["distance"] == pytest.approx(0.0, abs=1e-5)


def test_errors_name_the_option(collection: tuple[object, str], corpus_file: Path) -> None:
    client, name = collection
    with pytest.raises(EvretError, match=r"option 'collection': no collection 'nope-nope'"):
        ChromaRetriever("nope-nope", embedding=embed, client=client)
    with pytest.raises(EvretError, match="exactly one of the options 'embedding'"):
        ChromaRetriever(name, client=client)
    with pytest.raises(EvretError, match="exists already"):
        index_corpus(client, name, corpus_file, embed)


def test_plugin_load_does_not_import_chromadb() -> None:
    assert_plugin_load_leaves_unimported("chroma", "chromadb")
