"""Data model: dataset files in every format, with errors naming file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, EvretError, QueryExample, RetrievalResult
from evret_core.io.queries import derive_query_id


def test_jsonl_record_format_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps({"query_id": "q1", "query": "What is RAG?", "expected_answers": ["a"], "relevant_doc_ids": [1, "d2"],
                    "tags": {"type": "factoid", "n": 3}}) + "\n\n"
        + json.dumps({"query": "no id", "expected_answers": "one answer"}) + "\n",
        encoding="utf-8",
    )
    data = EvaluationDataset.load(path)
    first, second = data.queries
    assert first.relevant_doc_ids == ["1", "d2"] and first.tags == {"type": "factoid", "n": "3"}
    assert second.query_id == derive_query_id("no id") and second.expected_answers == ["one answer"]
    data.to_jsonl(tmp_path / "back.jsonl")
    assert EvaluationDataset.from_jsonl(tmp_path / "back.jsonl").content_hash() == data.content_hash()


def test_json_and_csv(tmp_path: Path) -> None:
    (tmp_path / "d.json").write_text(json.dumps({"queries": [{"query": "q", "relevant_doc_ids": {"d1": 2}}]}))
    assert EvaluationDataset.load(tmp_path / "d.json").queries[0].relevance == {"d1": 2.0}
    (tmp_path / "d.csv").write_text('query,expected_answers,tags\nWhat?,"a|b",type=factoid;lang=en\n')
    q = EvaluationDataset.load(tmp_path / "d.csv").queries[0]
    assert q.expected_answers == ["a", "b"] and q.tags == {"type": "factoid", "lang": "en"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"query": "a", "expected_answers": ["x"]}\n{"query": "b"', ":2: invalid JSON"),
        ('{"query": "a", "expected_answers": [1]}', ":1: record: expected answer 1 must be a text or a list"),
        ('{"query": "a", "answer": "x"}', ":1: unknown field 'answer' (did you mean answers?)"),
        ('{"query_id": "x", "query": "a", "expected_answers": ["x"]}\n'
         '{"query_id": "x", "query": "b", "expected_answers": ["y"]}', ":2: duplicate query_id 'x' (first on line 1)"),
        ("[1]", ":1: expected a JSON object"),
        ("\n\n", ": the dataset has no queries"),
    ],
)
def test_bad_jsonl_names_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvretError) as err:
        EvaluationDataset.from_jsonl(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_retrieval_result_text_shortcut() -> None:
    assert RetrievalResult(doc_id=7, metadata={"text": "t"}).text == "t"  # type: ignore[arg-type]
    assert RetrievalResult(doc_id="d").text is None


def test_query_example_labels() -> None:
    assert QueryExample(query_id="q", query_text="t", relevant_doc_ids=["a"]).relevance == {"a": 1.0}
    assert not QueryExample(query_id="q", query_text="t", expected_answers=["a"]).is_id_labelled
