"""`evret evaluate` reads the SQuAD-format JSON that `evret rag` reads (newcomer report, problem 12): the answerable
questions as text-labelled queries, the paragraphs as the corpus, the unanswerable questions left out with a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, EvretError
from evret_core.cli import main
from evret_core.testing.shared_data import shared_data

pytest.importorskip("evret_bm25", reason="evret-bm25 is not installed (make test installs every plugin)")


def squad_path() -> Path:
    return shared_data("datasets", "squad2", "dev-v2.0-subset.json", what="the SQuAD 2.0 subset")


def test_squad_json_as_a_retrieval_dataset() -> None:
    raw = json.loads(squad_path().read_text(encoding="utf-8"))["data"]
    qas = [qa for a in raw for p in a["paragraphs"] for qa in p["qas"]]
    dataset = EvaluationDataset.load(squad_path())
    answerable = [qa for qa in qas if not qa["is_impossible"]]
    assert [q.query_id for q in dataset] == [qa["id"] for qa in answerable] and len(dataset) == 386
    assert dataset.corpus is not None and len(dataset.corpus) == 83
    assert dataset.corpus["Normans-0"] == {"title": "Normans", "text": raw[0]["paragraphs"][0]["context"]}
    first = dataset.queries[1]  # its gold texts are the aliases of one expected answer
    assert first.expected_answers == ["10th and 11th centuries"]
    assert first.answer_aliases == [["10th and 11th centuries", "in the 10th and 11th centuries"]]
    assert first.tags == {"article": "Normans"}
    assert dataset.notes == [f"{squad_path()}: 320 unanswerable question(s) (is_impossible) left out: they have no "
                             f"expected answer to retrieve"]


def test_evaluate_cli_on_squad_json_matches_the_same_data_as_jsonl(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    metrics = ["--metric", "recall@5", "--metric", "mrr@10", "--resamples", "50"]
    out = tmp_path / "squad.json"
    assert main(["evaluate", "--dataset", str(squad_path()), "--retriever", "bm25", *metrics, "--no-progress",
                 "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert "dev-v2.0-subset: 386 queries" in captured.out
    assert "note: " in captured.err and "320 unanswerable question(s)" in captured.err
    got = json.loads(out.read_text(encoding="utf-8"))
    assert len(got["per_query"]) == 386
    assert 0.5 < got["scores"]["recall@5"] <= 1.0 and 0.3 < got["scores"]["mrr@10"] <= 1.0
    # the same questions and paragraphs written out by hand as a JSONL dataset and corpus score the same
    raw = json.loads(squad_path().read_text(encoding="utf-8"))["data"]
    corpus, queries = [], []
    for article in raw:
        for n, paragraph in enumerate(article["paragraphs"]):
            corpus.append({"_id": f"{article['title']}-{n}", "title": article["title"], "text": paragraph["context"]})
            for qa in paragraph["qas"]:
                if not qa["is_impossible"]:
                    texts = list(dict.fromkeys(a["text"] for a in qa["answers"]))
                    queries.append({"query_id": qa["id"], "query": qa["question"], "expected_answers": [texts],
                                    "tags": {"article": article["title"]}})
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (tmp_path / "squad.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    by_hand = tmp_path / "by_hand.json"
    assert main(["evaluate", "--dataset", str(tmp_path / "squad.jsonl"), "--retriever", "bm25", "--retriever-option",
                 f"corpus={tmp_path / 'corpus.jsonl'}", *metrics, "--no-progress", "--output", str(by_hand)]) == 0
    expected = json.loads(by_hand.read_text(encoding="utf-8"))
    assert got["scores"] == expected["scores"]


def test_squad_json_errors_name_the_place(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [
        {"id": "q1", "question": "q?", "is_impossible": "false", "answers": [{"text": "c", "answer_start": 0}]}]}]}]}))
    with pytest.raises(EvretError, match=r"s.json: data\[0\].paragraphs\[0\].qas\[0\]: field 'is_impossible'"):
        EvaluationDataset.load(path)
    path.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [
        {"id": "q1", "question": "q?", "is_impossible": True, "answers": []}]}]}]}))
    with pytest.raises(EvretError, match="s.json: the dataset has no queries"):
        EvaluationDataset.load(path)
