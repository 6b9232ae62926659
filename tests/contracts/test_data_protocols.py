"""The records Evret reads (``QueryExample``, ``EvaluationDataset``, ``RagQuestion``, ``QuestionSet``) and the
built-in retrieval evaluator satisfy the protocols of evret_core.contracts.data: structurally under mypy
(evret_core/testing/data_protocols.py, checked by ``mypy evret_core``), and here at run time, where every member a
protocol declares is read on a real record and has the protocol's type."""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest

from evret_core.contracts import data
from evret_core.evaluation.evaluator import Evaluator
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion
from evret_core.testing import data_protocols


def _members(protocol: type) -> list[str]:
    """The names a protocol declares (properties and methods), read from its class body."""
    return sorted(n for n, v in vars(protocol).items() if not n.startswith("_") and (isinstance(v, property)
                                                                                      or callable(v)))


QUERY = QueryExample(query_id="q1", query_text="who makes beeswax", expected_answers=[["worker bees", "workers"]],
                     relevant_doc_ids={"d3": 2.0}, tags={"type": "who"})
DATASET = EvaluationDataset(queries=[QUERY], corpus={"d3": {"text": "Beeswax is made by worker bees."}})
QUESTION = RagQuestion(question_id="r1", question="Who makes beeswax?", answers=[["worker bees", "workers"]],
                       gold_doc_ids=["d3"], tags={"type": "who"}, metadata={"source": "test"},
                       counterfactual_answers=["drones"])
QUESTIONS = QuestionSet(questions=[QUESTION], corpus={"d3": {"title": "Wax", "text": "Beeswax is made by bees."}})


def test_the_protocols_declare_what_plugins_read() -> None:
    assert _members(data.Dataset) == ["corpus", "queries"]
    assert _members(data.Questions) == ["corpus", "questions", "text_of"]
    assert _members(data.RetrievalEvaluator) == ["evaluate"]
    assert set(_members(data.Question)) == {*RagQuestion.model_fields, "answer_strings", "canonical_answers"}
    assert set(_members(data.Query)) == {*QueryExample.model_fields, "relevance"}


def _accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` is of the (runtime part of the) type ``hint``: its origin class, any arm of a union."""
    if get_origin(hint) in (Union, UnionType):
        return any(_accepts(arm, value) for arm in get_args(hint))
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    return isinstance(value, get_origin(hint) or hint)


@pytest.mark.parametrize(("protocol", "record"), [
    (data.Query, data_protocols.as_query(QUERY)),
    (data.Dataset, data_protocols.as_dataset(DATASET)),
    (data.Question, data_protocols.as_question(QUESTION)),
    (data.Questions, data_protocols.as_questions(QUESTIONS)),
], ids=["Query", "Dataset", "Question", "Questions"])
def test_every_member_reads_on_a_real_record_with_the_declared_type(protocol: type, record: Any) -> None:
    for name in _members(protocol):
        member = vars(protocol)[name]
        if isinstance(member, property):
            hint = get_type_hints(member.fget)["return"]
            assert _accepts(hint, getattr(record, name)), f"{type(record).__name__}.{name} is not a {hint}"
        else:
            assert callable(getattr(record, name)), f"{type(record).__name__}.{name} is not callable"


def test_the_records_answer_as_the_protocols_say() -> None:
    query: data.Query = data_protocols.as_query(QUERY)
    assert (query.query_id, query.expected_answers, query.answer_aliases) == ("q1", ["worker bees"],
                                                                              [["worker bees", "workers"]])
    assert query.relevance == {"d3": 2.0}
    dataset: data.Dataset = data_protocols.as_dataset(DATASET)
    assert [q.query_id for q in dataset.queries] == ["q1"] and dataset.corpus is not None
    question: data.Question = data_protocols.as_question(QUESTION)
    assert question.canonical_answers == ["worker bees"]
    assert question.answer_strings == ["worker bees", "workers"]
    assert question.expected_behaviour == "answer"
    questions: data.Questions = data_protocols.as_questions(QUESTIONS)
    assert [q.question_id for q in questions.questions] == ["r1"]
    assert questions.text_of("d3") == "Wax\nBeeswax is made by bees." and questions.text_of("nope") is None


def test_the_built_in_retrieval_evaluator_evaluates_a_dataset() -> None:
    evaluator: data.RetrievalEvaluator = data_protocols.as_retrieval_evaluator(
        Evaluator(retriever=lambda query, k: [{"doc_id": "d3", "score": 1.0}], metrics=["recall@1"]))
    results = evaluator.evaluate(DATASET)
    assert results.scores["recall@1"] == 1.0
