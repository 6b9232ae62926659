"""The dense retriever: exact top-k against brute force, saved embeddings, dataset corpora, the contract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from evret_sentence_transformers import DenseRetriever, SemanticJudge

from evret_core import EvaluationDataset, Evaluator, EvretError, QueryExample, create_retriever
from evret_core.contracts.retrieve import Retriever
from evret_core.testing import RetrieverConformance

DOCS = [
    ("paris", "Landmarks", "The Eiffel Tower stands in Paris, France."),
    ("boil", "Physics", "At sea level, water boils at 100 degrees Celsius."),
    ("aspirin", "Medicine", "Taking aspirin daily lowers the risk of a heart attack."),
    ("tokyo", "", "Tokyo is the capital city of Japan."),
    ("market", "Finance", "The stock market fell sharply on Monday after the rate decision."),
    ("football", "Sport", "Football is the most popular sport in Brazil."),
    ("photo", "Biology", "Photosynthesis converts sunlight into chemical energy in plants."),
    ("mito", "Biology", "Mitochondria produce most of the cell's supply of ATP."),
    ("rome", "History", "The Roman Empire was founded in 27 BC by Augustus."),
    ("python", "Computing", "Python is a programming language that emphasises readability."),
    ("everest", "Geography", "Mount Everest is the highest mountain above sea level."),
    ("moon", "Space", "The Moon orbits the Earth roughly every 27 days."),
]
QUERIES = [
    "Where is the Eiffel Tower?",
    "At what temperature does water boil?",
    "Does aspirin prevent heart attacks?",
    "What is the capital of Japan?",
    "Which organelle makes ATP?",
    "What is the tallest mountain?",
]


def write_corpus(path: Path, docs: list[tuple[str, str, str]] = DOCS, id_key: str = "_id") -> Path:
    lines = [json.dumps({id_key: i, "title": t, "text": x} if t else {id_key: i, "text": x}) for i, t, x in docs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_top_k_equals_brute_force(tmp_path: Path, loaded_judge: SemanticJudge) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    retriever = DenseRetriever(corpus=str(corpus))
    results = retriever.batch_retrieve(QUERIES, k=5)

    model = loaded_judge.encoder.model
    doc_texts = [f"{t} {x}" if t else x for _, t, x in DOCS]
    docs = model.encode(doc_texts, normalize_embeddings=True)
    queries = model.encode(QUERIES, normalize_embeddings=True)
    scores = queries @ docs.T
    for row, ranked in enumerate(results):
        order = np.argsort(-scores[row], kind="stable")[:5]
        assert [r.doc_id for r in ranked] == [DOCS[i][0] for i in order]
        np.testing.assert_allclose([r.score for r in ranked], scores[row][order], atol=1e-5)
    # the obvious answers come first
    assert [r[0].doc_id for r in results] == ["paris", "boil", "aspirin", "tokyo", "mito", "everest"]
    assert results[0][0].metadata == {"text": DOCS[0][2], "title": DOCS[0][1]}
    # k larger than the corpus returns every document, ranked
    everything = retriever.retrieve(QUERIES[0], k=100)
    assert sorted(r.doc_id for r in everything) == sorted(d[0] for d in DOCS)
    assert [r.score for r in everything] == sorted((r.score for r in everything), reverse=True)


def test_blocked_scoring_matches_one_block(tmp_path: Path, loaded_judge: SemanticJudge,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_sentence_transformers import retriever as module

    corpus = write_corpus(tmp_path / "corpus.jsonl")
    retriever = DenseRetriever(corpus=str(corpus), save_embeddings=False)
    whole = retriever.batch_retrieve(QUERIES, k=3)
    monkeypatch.setattr(module, "_BLOCK_CELLS", len(DOCS))  # one query row per block
    blocked = retriever.batch_retrieve(QUERIES, k=3)
    assert [[r.doc_id for r in rs] for rs in blocked] == [[r.doc_id for r in rs] for rs in whole]


def test_embeddings_are_saved_next_to_the_corpus_and_reused(tmp_path: Path, loaded_judge: SemanticJudge,
                                                             count_encodes: object) -> None:
    corpus = write_corpus(tmp_path / "corpus.jsonl")
    first = DenseRetriever(corpus=str(corpus))
    answers = first.batch_retrieve(QUERIES, k=3)
    assert first.embeddings_source == "computed"
    saved = tmp_path / "corpus.model.embeddings.npz"
    assert first.saved_to == saved and saved.is_file()
    assert len(count_encodes.texts) == len(DOCS) + len(QUERIES)  # type: ignore[attr-defined]

    again = DenseRetriever(corpus=str(corpus))
    reloaded = again.batch_retrieve(QUERIES, k=3)  # the queries encoded anew: scores within float32 rounding
    assert [[r.doc_id for r in rs] for rs in reloaded] == [[r.doc_id for r in rs] for rs in answers]
    for got, want in zip(reloaded, answers, strict=True):
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-6)
    assert again.embeddings_source == "loaded"
    assert again.stats()["texts_encoded"] == len(QUERIES)  # only the queries
    assert len(count_encodes.texts) == len(DOCS) + 2 * len(QUERIES)  # type: ignore[attr-defined]

    # a changed corpus no longer matches the saved key: embedded again, file rewritten
    write_corpus(corpus, DOCS[:-1])
    changed = DenseRetriever(corpus=str(corpus))
    changed.batch_retrieve(QUERIES[:1], k=3)
    assert changed.embeddings_source == "computed"
    assert DenseRetriever(corpus=str(corpus)).index().shape == (len(DOCS) - 1, 384)


def test_dataset_corpus_and_explicit_embeddings_path(tmp_path: Path, loaded_judge: SemanticJudge) -> None:
    dataset = EvaluationDataset(
        queries=[QueryExample(query_id="q1", query_text=QUERIES[3], expected_answers=["Tokyo is Japan's capital."]),
                 QueryExample(query_id="q2", query_text=QUERIES[0],
                              expected_answers=["The Eiffel Tower is in Paris."])],
        corpus={i: {"title": t, "text": x} for i, t, x in DOCS},
    )
    store = tmp_path / "emb" / "scifact-like.npz"
    retriever = create_retriever("dense", dataset=dataset, embeddings=str(store))
    assert isinstance(retriever, DenseRetriever)
    # sentence paraphrases as answers: the 0.75 threshold (the default, 0.94, is tuned for answers in passages)
    judge = SemanticJudge(threshold=0.75)
    results = Evaluator(retriever=retriever, metrics=["recall@3", "mrr"], judge=judge).evaluate(dataset)
    assert results.scores["mrr"] == pytest.approx(1.0)
    assert store.is_file()
    reused = DenseRetriever(dataset=dataset, embeddings=str(store))
    reused.index()
    assert reused.embeddings_source == "loaded"


def test_id_key_and_beir_folder(tmp_path: Path, loaded_judge: SemanticJudge) -> None:
    write_corpus(tmp_path / "corpus.jsonl", id_key="id")
    retriever = DenseRetriever(corpus=str(tmp_path), save_embeddings=False)
    assert retriever.retrieve(QUERIES[1], k=1)[0].doc_id == "boil"
    assert not list(tmp_path.glob("*.npz"))


def test_corpus_errors_name_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b"}\n', encoding="utf-8")
    with pytest.raises(EvretError, match=r"bad.jsonl:2: field 'text'"):
        DenseRetriever(corpus=str(bad))
    bad.write_text('{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(EvretError, match=r"bad.jsonl:2: duplicate document id 'a' \(first on line 1\)"):
        DenseRetriever(corpus=str(bad))
    bad.write_text('{"_id": "a", "text": "x"\n', encoding="utf-8")
    with pytest.raises(EvretError, match=r"bad.jsonl:1: invalid JSON"):
        DenseRetriever(corpus=str(bad))
    with pytest.raises(EvretError, match="missing.jsonl: no such corpus file"):
        DenseRetriever(corpus=str(tmp_path / "missing.jsonl"))
    with pytest.raises(EvretError, match="no corpus"):
        DenseRetriever()


class TestDenseRetrieverConformance(RetrieverConformance):
    @pytest.fixture
    def retriever(self, tmp_path: Path, loaded_judge: SemanticJudge) -> DenseRetriever:
        return DenseRetriever(corpus=str(write_corpus(tmp_path / "c.jsonl")), embeddings=str(tmp_path / "e.npz"))

    @pytest.fixture
    def queries(self) -> list[str]:
        return QUERIES


def test_repeated_queries_and_bad_k(tmp_path: Path, loaded_judge: SemanticJudge) -> None:
    retriever = DenseRetriever(corpus=str(write_corpus(tmp_path / "c.jsonl")), save_embeddings=False)
    assert isinstance(retriever, Retriever)
    batch = retriever.batch_retrieve(QUERIES + [QUERIES[0]], k=4)
    assert batch[-1] == batch[0]
    assert retriever.stats()["texts_encoded"] == len(DOCS) + len(QUERIES)  # the repeated query encoded once
    with pytest.raises(EvretError, match="k must be"):
        retriever.retrieve(QUERIES[0], k=0)
    assert retriever.config()["name"] == "dense"
