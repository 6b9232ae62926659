"""evret-qdrant against qdrant-client's local mode (in memory and on disk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from evret_qdrant import QdrantRetriever, index_corpus
from qdrant_client import QdrantClient

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
def memory_client(corpus_file: Path) -> QdrantClient:
    client = QdrantClient(location=":memory:")
    assert index_corpus(client, "bees", corpus_file, embed, batch_size=4) == 6
    return client


class TestConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, memory_client: QdrantClient) -> QdrantRetriever:
        return QdrantRetriever("bees", embedding=embed, client=memory_client)

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


class TestRanking:
    """Beyond the contract: the expected documents come first, in batches smaller than the query list."""

    def test_batch_shape_order_and_cut(self, memory_client: QdrantClient) -> None:
        retriever = QdrantRetriever("bees", embedding=embed, client=memory_client, batch_size=2)
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


def test_texts_ids_and_payload_metadata(memory_client: QdrantClient) -> None:
    top = QdrantRetriever("bees", embedding=embed, client=memory_client).retrieve("drones mate", 1)[0]
    assert top.doc_id == "d4"
    assert top.text == "Drones Drones are male bees whose main role is to mate with a queen."  # title + text
    assert top.metadata["topic"] == "hive" and top.metadata["title"] == "Drones"
    assert 0 < top.score <= 1.0


class RecordingClient(QdrantClient):
    """A real local-mode QdrantClient that notes the payload each batch of queries asks for."""

    def __init__(self) -> None:
        super().__init__(location=":memory:")
        self.asked: list[object] = []

    def query_batch_points(self, collection_name: str, requests: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.asked.extend(r.with_payload for r in requests)
        return super().query_batch_points(collection_name, requests, **kwargs)


def test_columns_fetch_only_the_text_and_id_fields(corpus_file: Path) -> None:
    """The evaluator's path leaves the rest of the payload in Qdrant; batch_retrieve fetches all of it."""
    client = RecordingClient()
    index_corpus(client, "bees", corpus_file, embed)
    retriever = QdrantRetriever("bees", embedding=embed, client=client)
    columns = retriever.batch_retrieve_columns(["wax glands"], 3)
    results = retriever.batch_retrieve(["wax glands"], 3)
    assert client.asked == [["text", "doc_id"], True]
    assert list(columns[0].ids) == [r.doc_id for r in results[0]] and columns[0].ids[0] == "d5"
    assert list(columns[0].texts or []) == [r.text for r in results[0]]
    assert results[0][0].metadata["topic"] == "products"
    # a missing text field: the message lists the point's whole payload, not the two fields fetched
    with pytest.raises(EvretError, match=r"no payload field 'body' \(option 'text_field'\); its payload fields "
                                         r"are \['doc_id', 'text', 'title', 'topic'\]"):
        QdrantRetriever("bees", embedding=embed, client=client, text_field="body").batch_retrieve_columns(["wax"], 1)


def test_filters_pass_through(memory_client: QdrantClient) -> None:
    hive_only = {"must": [{"key": "topic", "match": {"value": "hive"}}]}
    retriever = QdrantRetriever("bees", embedding=embed, client=memory_client, filter=hive_only)
    results = retriever.retrieve("waggle dance direction", 5)
    assert {r.doc_id for r in results} == {"d3", "d4"}
    assert retriever.config()["filter"]["must"][0]["key"] == "topic"


def test_on_disk_collection_through_the_registry(corpus_file: Path, tmp_path: Path) -> None:
    store = tmp_path / "qdrant"
    client = QdrantClient(path=str(store))
    index_corpus(client, "bees", corpus_file, embed)
    client.close()
    retriever = create_retriever("qdrant", collection="bees", path=str(store), embedding=embed)
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="which bees communicate food direction", relevant_doc_ids=["d1"]),
        QueryExample(query_id="b", query_text="beeswax glands on the abdomen", relevant_doc_ids=["d5"]),
    ])
    results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"]).evaluate(dataset)
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["collection"] == "bees"
    retriever.client.close()


def test_langchain_embeddings_are_accepted(corpus_file: Path) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    client = QdrantClient(location=":memory:")
    fake = DeterministicFakeEmbedding(size=32)
    index_corpus(client, "bees", [{"doc_id": d["_id"], "text": d["text"]} for d in DOCS], fake)
    results = QdrantRetriever("bees", embedding=fake, client=client).retrieve(DOCS[2]["text"], 2)
    assert results[0].doc_id == "d3" and results[0].score == pytest.approx(1.0)


def test_point_ids_when_the_payload_has_no_id(memory_client: QdrantClient) -> None:
    from evret_qdrant.retriever import point_id

    top = QdrantRetriever("bees", embedding=embed, client=memory_client, id_field=None).retrieve("wax", 1)[0]
    assert top.doc_id == point_id("d5")


def test_errors_name_the_option(memory_client: QdrantClient, corpus_file: Path) -> None:
    with pytest.raises(EvretError, match=r"option 'collection': no collection 'nope' \(existing: bees\)"):
        QdrantRetriever("nope", embedding=embed, client=memory_client)
    with pytest.raises(EvretError, match=r"no payload field 'body' \(option 'text_field'\)"):
        QdrantRetriever("bees", embedding=embed, client=memory_client, text_field="body").retrieve("wax", 1)
    with pytest.raises(EvretError, match="exactly one of the options"):
        QdrantRetriever("bees", embedding=embed)
    with pytest.raises(EvretError, match="option 'embedding' is required"):
        QdrantRetriever("bees", client=memory_client)
    with pytest.raises(EvretError, match="exists already"):
        index_corpus(memory_client, "bees", corpus_file, embed)
    with pytest.raises(EvretError, match="returned 1 vectors for 2 texts"):
        QdrantRetriever("bees", embedding=lambda texts: embed(texts[:1]), client=memory_client).batch_retrieve(
            ["a", "b"], 1)


def test_plugin_load_does_not_import_qdrant_client() -> None:
    assert_plugin_load_leaves_unimported("qdrant", "qdrant_client")
