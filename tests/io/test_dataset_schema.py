"""One field schema for `evret evaluate` datasets and `evret rag` question sets (the table of
evret_core.io.dataset_files.FIELDS, documented once in docs/index.md), and CSV files whatever their delimiter."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, EvretError
from evret_core.cli import main
from evret_core.io.dataset_files import FIELDS

ROOT = Path(__file__).resolve().parents[2]
RAG = ROOT / "examples" / "rag"


def _jsonl(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_evaluate_reads_the_rag_spellings(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "d.jsonl",
                  {"id": "r1", "question": "When?", "answers": [["5 pm", "five pm"]], "tags": {"t": "x"}},
                  {"question_id": 7, "query_text": "Who?", "gold_doc_ids": ["d1"]})
    dataset = EvaluationDataset.load(data)
    first, second = dataset.queries
    assert (first.query_id, first.query_text, first.answer_aliases, first.tags) == (
        "r1", "When?", [["5 pm", "five pm"]], {"t": "x"})
    assert (second.query_id, second.query_text, second.relevant_doc_ids) == ("7", "Who?", ["d1"])


def test_evaluate_reads_a_csv_with_rag_column_names(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text('id,question,answers\nr1,When?,"[[""5 pm"", ""five pm""]]"\n', encoding="utf-8")
    (query,) = EvaluationDataset.load(data).queries
    assert (query.query_id, query.query_text, query.answer_aliases) == ("r1", "When?", [["5 pm", "five pm"]])


def test_rag_reads_the_evaluate_spellings(tmp_path: Path) -> None:
    from evret_core.rag.questions.question_sets import QuestionSet

    data = _jsonl(tmp_path / "q.jsonl", {"query_id": "q1", "query_text": "When?", "expected_answers": ["5 pm"],
                                         "relevant_doc_ids": ["lib-01"]})
    (question,) = QuestionSet.load(data, RAG / "corpus.jsonl").questions
    assert (question.question_id, question.question, question.answers, question.gold_doc_ids) == (
        "q1", "When?", [["5 pm"]], ["lib-01"])


@pytest.mark.parametrize("record", [
    {"query": "When?", "question": "When?", "expected_answers": ["x"]},
    {"query": "When?", "expected_answers": ["x"], "answers": ["x"]},
    {"query_id": "a", "id": "a", "query": "When?", "expected_answers": ["x"]},
])
def test_two_spellings_of_one_field_are_an_error_in_both_readers(tmp_path: Path, record: dict[str, object]) -> None:
    from evret_core.rag.questions.question_sets import QuestionSet

    data = _jsonl(tmp_path / "d.jsonl", {"query": "ok", "expected_answers": ["x"]}, record)
    with pytest.raises(EvretError, match=r"d.jsonl:2: fields '\w+' and '\w+' are two spellings of one field"):
        EvaluationDataset.load(data)
    with pytest.raises(EvretError, match=r"d.jsonl:2: fields '\w+' and '\w+' are two spellings of one field"):
        QuestionSet.load(data)


def test_a_csv_header_with_two_spellings_is_an_error_at_line_1(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("query,question,answers\nWhen?,When?,x\n", encoding="utf-8")
    with pytest.raises(EvretError, match=r"d.csv:1: fields 'query' and 'question' are two spellings of one field"):
        EvaluationDataset.load(data)


def test_an_unknown_field_names_the_meant_spelling_in_both_readers(tmp_path: Path) -> None:
    from evret_core.rag.questions.question_sets import QuestionSet

    data = _jsonl(tmp_path / "d.jsonl", {"question": "When?", "answer": ["x"]})
    for load in (EvaluationDataset.load, QuestionSet.load):
        with pytest.raises(EvretError, match=r"d.jsonl:1: unknown field 'answer' \(did you mean answers\?\)"):
            load(data)


def test_the_bundled_rag_question_set_evaluates_and_leaves_the_questions_to_refuse_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evret_core.rag.questions.question_sets import QuestionSet

    questions = QuestionSet.load(RAG / "questions.jsonl", RAG / "corpus.jsonl").questions
    unlabelled = [q for q in questions if not q.answers and not q.gold_doc_ids]
    assert unlabelled and all(q.expected_behaviour != "answer" for q in unlabelled)
    dataset = EvaluationDataset.load(RAG / "questions.jsonl")
    assert len(dataset) == len(questions) - len(unlabelled)
    assert dataset.notes == [f"{len(unlabelled)} question(s) expected to be refused or escalated, with no answers "
                             f"nor gold ids, left out: retrieval has nothing to find for them (evret rag scores "
                             f"their behaviour)"]
    out = tmp_path / "r.json"
    assert main(["evaluate", "--dataset", str(RAG / "questions.jsonl"), "--retriever", "bm25", "--retriever-option",
                 f"corpus={RAG / 'corpus.jsonl'}", "--metric", "recall@5", "--no-progress",
                 "--output", str(out)]) == 0
    assert f"note: {dataset.notes[0]}" in capsys.readouterr().err
    assert len(json.loads(out.read_text())["per_query"]) == len(dataset)


def test_a_question_to_refuse_keeps_its_labels_and_a_bad_behaviour_is_an_error(tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "d.jsonl", {"question": "When?", "answers": ["x"], "expected_behaviour": "refuse"})
    assert len(EvaluationDataset.load(data)) == 1
    _jsonl(data, {"question": "When?", "answers": ["x"], "expected_behaviour": "refused"})
    with pytest.raises(EvretError, match=r"d.jsonl:1: field 'expected_behaviour' must be answer, refuse, "
                                         r"escalate or clarify, got 'refused'"):
        EvaluationDataset.load(data)


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_a_csv_with_another_delimiter_is_read(tmp_path: Path, delimiter: str) -> None:
    data = tmp_path / "d.csv"
    rows = [["query_id", "query", "expected_answers"], ["q1", "When, exactly?", "5 pm"], ["q2", "Who?", "Ann"]]
    data.write_text("".join(delimiter.join(r) + "\n" for r in rows), encoding="utf-8")
    dataset = EvaluationDataset.load(data)
    assert [(q.query_id, q.query_text, q.expected_answers) for q in dataset] == [
        ("q1", "When, exactly?", ["5 pm"]), ("q2", "Who?", ["Ann"])]


def test_a_csv_without_a_query_column_names_the_delimiter_it_read(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("query_id;expected_answers\nq1;x\n", encoding="utf-8")
    with pytest.raises(EvretError, match=r"d.csv:1: the CSV header \(read with ';' as the delimiter: query_id, "
                                         r"expected_answers\) needs a 'query' column \(or 'question', "
                                         r"'query_text'\)"):
        EvaluationDataset.load(data)


def test_the_docs_table_lists_every_field_and_spelling() -> None:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    section = text[text.index("| field (other spellings) |"):]
    rows = [line for line in section.splitlines()[2:] if line.startswith("|")]
    documented = {}
    for row in rows[:len(FIELDS) + 1]:
        spellings = re.findall(r"`([a-z_]+)`", row.split("|")[1])
        documented[spellings[0]] = tuple(spellings)
    assert documented == FIELDS
    rag = (ROOT / "docs" / "rag.md").read_text(encoding="utf-8")
    assert "index.md#one-schema-for-every-dataset" in rag and "| field |" not in rag  # documented once
