"""The data records satisfy the data protocols of :mod:`evret_core.contracts.data`, checked by mypy: each function
hands its record back typed as the protocol, so ``mypy evret_core`` fails when a record stops satisfying the
protocol plugins are typed against (tests/contracts/test_data_protocols.py calls them on real records)."""

from __future__ import annotations

from evret_core.contracts.data import Dataset, Query, Question, Questions, RetrievalEvaluator
from evret_core.evaluation.evaluator import Evaluator
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion


def as_query(query: QueryExample) -> Query:
    return query


def as_dataset(dataset: EvaluationDataset) -> Dataset:
    return dataset


def as_question(question: RagQuestion) -> Question:
    return question


def as_questions(questions: QuestionSet) -> Questions:
    return questions


def as_retrieval_evaluator(evaluator: Evaluator) -> RetrievalEvaluator:
    return evaluator
