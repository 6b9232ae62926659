"""What plugins read of the data records: :class:`Query` and :class:`Dataset` (retrieval), :class:`Question` and
:class:`Questions` (RAG), and the :class:`RetrievalEvaluator` that scores a retriever on a dataset.

They are ``Protocol`` s, typing only: the records themselves (``QueryExample``, ``EvaluationDataset``, ``RagQuestion``,
``QuestionSet``) live where their files are read, and satisfy these structurally (read-only members, so a record's
``list`` field matches a ``Sequence`` here; ``tests/contracts/test_data_protocols.py`` checks it with mypy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class Query(Protocol):
    """One evaluation query: its id and text, and what counts as a correct retrieval for it (``expected_answers``
    with each answer's acceptable strings in ``answer_aliases``, or ``relevant_doc_ids``: ids, or id -> grade);
    ``relevance`` is the ids as a mapping id -> grade; ``tags`` label slices."""

    @property
    def query_id(self) -> str: ...

    @property
    def query_text(self) -> str: ...

    @property
    def expected_answers(self) -> Sequence[str]: ...

    @property
    def answer_aliases(self) -> Sequence[Sequence[str]]: ...

    @property
    def relevant_doc_ids(self) -> Sequence[str] | Mapping[str, float] | None: ...

    @property
    def tags(self) -> Mapping[str, str]: ...

    @property
    def relevance(self) -> Mapping[str, float]: ...


class Dataset(Protocol):
    """Evaluation queries with unique ids, and the corpus (doc id -> record with ``text``) when one was given."""

    @property
    def queries(self) -> Sequence[Query]: ...

    @property
    def corpus(self) -> Mapping[str, Mapping[str, Any]] | None: ...


class Question(Protocol):
    """One question of a RAG evaluation: ``answers`` holds each expected answer's acceptable strings (the first
    canonical: ``canonical_answers``; all of them, without repeats: ``answer_strings``), ``gold_doc_ids`` the
    documents holding the answer, ``expected_behaviour`` ``answer``, ``refuse`` or ``escalate``."""

    @property
    def question_id(self) -> str: ...

    @property
    def question(self) -> str: ...

    @property
    def answers(self) -> Sequence[Sequence[str]]: ...

    @property
    def gold_doc_ids(self) -> Sequence[str]: ...

    @property
    def expected_behaviour(self) -> str: ...

    @property
    def tags(self) -> Mapping[str, str]: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...

    @property
    def counterfactual_answers(self) -> Sequence[str]: ...

    @property
    def counterfactual_passages(self) -> Sequence[str]: ...

    @property
    def canonical_answers(self) -> list[str]: ...

    @property
    def answer_strings(self) -> list[str]: ...


class Questions(Protocol):
    """RAG questions with unique ids and the corpus (doc id -> ``{"title", "text"}``) their gold ids point into;
    ``text_of(doc_id)`` is a document's text as retrievers index it (None when the corpus lacks it)."""

    @property
    def questions(self) -> Sequence[Question]: ...

    @property
    def corpus(self) -> Mapping[str, Mapping[str, str]]: ...

    def text_of(self, doc_id: str) -> str | None: ...


class RetrievalEvaluator(Protocol):
    """What a retrieval evaluator factory returns (the ``retrieval_evaluator`` kind): ``evaluate(dataset)`` scores
    its retriever on a :class:`Dataset` and returns the evaluation results, with a result for every query; anything
    that is not a dataset is an ``EvretError``, hence ``Any``."""

    def evaluate(self, dataset: Any) -> Any: ...
