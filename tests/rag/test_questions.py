"""Question sets: the JSONL reader (aliases, behaviours, errors with file:line) and the SQuAD converter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.rag import QuestionSet
from evret_core.rag.questions.question_sets import squad_paragraph_id

from .conftest import squad_path


def write(path: Path, *lines: object) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_answers_with_aliases_and_behaviours(tmp_path: Path) -> None:
    corpus = write(tmp_path / "corpus.jsonl", {"id": "d1", "title": "T", "text": "Bees make wax."})
    qs = QuestionSet.from_jsonl(write(
        tmp_path / "q.jsonl",
        {"id": "q1", "question": "What do bees make?", "answers": ["wax", ["honey", "nectar honey"]],
         "gold_doc_ids": ["d1"], "tags": {"type": "factoid"}},
        "",
        {"query": "Phone number?", "expected_behavior": "refuse"},
    ), corpus)
    q1, q2 = qs.questions
    assert q1.answers == [["wax"], ["honey", "nectar honey"]]
    assert q1.canonical_answers == ["wax", "honey"]
    assert q1.answer_strings == ["wax", "honey", "nectar honey"]
    assert q2.expected_behaviour == "refuse" and q2.answers == [] and q2.question_id.startswith("q_")
    assert qs.text_of("d1") == "T\nBees make wax."


@pytest.mark.parametrize(("line", "message"), [
    ('{"question": "x", "answers": ["a"], "colour": 1}', "q.jsonl:2: unknown field 'colour'"),
    ('{"question": "x"}', "q.jsonl:2: .*needs answers or gold_doc_ids"),
    ('{"question": "x", "answers": ["a"], "expected_behaviour": "shrug"}', "q.jsonl:2: expected_behaviour must be"),
    ('{"question": "   ", "answers": ["a"]}', "q.jsonl:2: question: .*empty"),
    ('{"question": "x", "answers": [["a", ""]]}', "q.jsonl:2: answers: .*answer 0 is empty"),
    ('{"id": "q1", "question": "y", "answers": ["a"]}', "q.jsonl:2: duplicate question id 'q1' \\(first at"),
    ('{"question": "x", "answers": ["a"]', "q.jsonl:2: invalid JSON"),
    ('["x"]', "q.jsonl:2: expected a JSON object"),
])
def test_jsonl_errors_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path / "q.jsonl", {"id": "q1", "question": "ok?", "answers": ["a"]}, line)
    with pytest.raises(EvretError, match=message):
        QuestionSet.from_jsonl(path)


def test_a_question_to_clarify_is_read_without_labels(tmp_path: Path) -> None:
    """``clarify`` is scored (the generator must ask the user which one they mean), so a question set may hold it,
    like a question to refuse, without answers or gold ids."""
    qs = QuestionSet.from_jsonl(write(tmp_path / "q.jsonl", {"id": "q1", "question": "ok?", "answers": ["a"]},
                                      {"id": "q2", "question": "And the other one?", "expected_behaviour": "clarify"}))
    assert [(q.question_id, q.expected_behaviour, q.answers) for q in qs.questions] == [
        ("q1", "answer", [["a"]]), ("q2", "clarify", [])]


def test_gold_ids_must_be_in_the_corpus(tmp_path: Path) -> None:
    corpus = write(tmp_path / "c.jsonl", {"id": "d1", "text": "x"})
    path = write(tmp_path / "q.jsonl", {"id": "q1", "question": "ok?", "gold_doc_ids": ["d9"]})
    with pytest.raises(EvretError, match="gold id.*not in the corpus.*q1: d9"):
        QuestionSet.from_jsonl(path, corpus)
    with pytest.raises(EvretError, match="no questions"):
        QuestionSet.from_jsonl(write(tmp_path / "empty.jsonl", ""))
    with pytest.raises(EvretError, match="unknown question-set format"):
        QuestionSet.load(tmp_path / "q.csv")


def test_squad_converter_on_the_real_subset() -> None:
    qs = QuestionSet.load(squad_path())
    data = json.loads(squad_path().read_text(encoding="utf-8"))["data"]
    assert len(qs) == 706 and len(qs.corpus) == 83  # PROVENANCE.md: 706 questions, 83 paragraphs
    refuse = [q for q in qs.questions if q.expected_behaviour == "refuse"]
    assert len(refuse) == 320 and all(not q.answers for q in refuse)
    answerable = [q for q in qs.questions if q.expected_behaviour == "answer"]
    assert len(answerable) == 386
    # 182 answerable questions have more than one distinct gold text: they become aliases of one answer
    assert sum(len(q.answers[0]) > 1 for q in answerable) == 182
    assert all(len(q.answers) == 1 for q in answerable)
    first = data[0]["paragraphs"][0]
    q = qs.questions[1]
    assert q.question == first["qas"][1]["question"]
    assert q.answers == [["10th and 11th centuries", "in the 10th and 11th centuries"]]
    assert q.gold_doc_ids == [squad_paragraph_id("Normans", 0)] == ["Normans-0"]
    assert qs.corpus["Normans-0"]["text"] == first["context"]
    assert q.tags == {"article": "Normans", "answerable": "yes"}
    # spans keep their offsets into the gold paragraph; unanswerable questions keep their plausible answers
    for text, start in q.metadata["answer_spans"]:
        assert first["context"][start: start + len(text)] == text
    impossible = next(x for x in first["qas"] if x["is_impossible"])
    converted = next(x for x in qs.questions if x.question_id == impossible["id"])
    assert converted.metadata["plausible_answers"] == [[a["text"], a["answer_start"]]
                                                      for a in impossible["plausible_answers"]]
    assert converted.metadata["answer_spans"] == []


def test_squad_converter_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "1", "question": "q",'
                   ' "answers": [], "is_impossible": false}]}]}]}', encoding="utf-8")
    with pytest.raises(EvretError, match=r"bad.json: data\[0\].paragraphs\[0\].qas\[0\]: an answerable question"):
        QuestionSet.load(bad)
    bad.write_text('{"version": 2}', encoding="utf-8")
    with pytest.raises(EvretError, match="not a SQuAD-format file"):
        QuestionSet.load(bad)
    with pytest.raises(EvretError, match="carries its own corpus"):
        QuestionSet.load(bad, corpus=tmp_path / "c.jsonl")
