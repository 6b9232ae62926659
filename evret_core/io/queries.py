"""One evaluation query: :class:`QueryExample` (its text, id, expected answers or relevant ids, tags), the id derived
for a query that has none, and the checks its fields get as it is read. The dataset readers
(:mod:`evret_core.io.dataset_files`) build them."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evret_core.contracts.judge import JudgmentContext

__all__ = ["QueryExample", "derive_query_id", "ids_as_strings", "tags_as_strings"]


def _encodable(text: str, what: str) -> str:
    """``text``, or a ValueError when it holds a lone surrogate (from a ``\\ud800`` escape): such a string
    cannot be hashed, cached or written as UTF-8, so it is refused when it is read, not after retrieval."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{what} holds a lone surrogate ({text[exc.start]!r}), which is not text") from None
    return text


def derive_query_id(query_text: str) -> str:
    """A stable id for a query that has none: the first 12 hex digits of the SHA-256 of its text."""
    return "q_" + hashlib.sha256(query_text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def ids_as_strings(value: Any) -> Any:
    """Document ids as strings: ids in JSON files are often numbers, which name the same documents as their string
    form (a mapping's keys, a list's integers; a single string becomes a one-id list)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def tags_as_strings(value: Any) -> Any:
    """Tag names and values as strings (a slice is named by its text)."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return value


class QueryExample(BaseModel):
    """One evaluation query with what counts as a correct retrieval for it.

    ``expected_answers`` (texts a judge compares with the retrieved texts) or ``relevant_doc_ids`` (a list of
    ids, or a mapping id -> grade for graded relevance) say what counts as relevant; with ids the query is scored
    without judging. A query with neither (:attr:`is_unlabelled`) is read as it is: only a judge that needs no
    expected answer (:attr:`~evret_core.contracts.judge.Judge.reference_free`) can score it, and the evaluator
    refuses it otherwise, before retrieving. ``tags`` label slices such as question type or domain.

    An expected answer may have several acceptable strings (aliases): give it as a list of strings, the first
    being its canonical form, e.g. ``expected_answers=[["10th and 11th centuries", "in the 10th and 11th
    centuries"], "France"]``. Then ``expected_answers`` holds the canonical texts (one per answer) and
    ``answer_aliases`` every acceptable string of each answer (``answer_aliases[i][0] == expected_answers[i]``).
    A retrieved text matching any alias matches that answer; recall counts answers, not aliases. Empty answers
    and empty alias lists are rejected.
    """

    model_config = ConfigDict(frozen=False, extra="forbid")

    query_id: str
    query_text: str
    expected_answers: list[str] = Field(default_factory=list)
    answer_aliases: list[list[str]] = Field(default_factory=list)
    relevant_doc_ids: list[str] | dict[str, float] | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _split_aliases(cls, data: Any) -> Any:
        # an answer given as a list of strings is one answer with aliases: keep its first string as the canonical
        # text in expected_answers, and all of them in answer_aliases
        if not isinstance(data, Mapping) or "expected_answers" not in data:
            return data
        answers = data["expected_answers"]
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, (list, tuple)):
            return data  # pydantic reports the type error
        given = data.get("answer_aliases")
        if given:  # both given (a dumped model): one alias list per canonical text, starting with it
            if not isinstance(given, (list, tuple)) or len(given) != len(answers):
                raise ValueError("answer_aliases must have one list of texts per expected answer")
            aliases = [_answer_variants(a, i) for i, a in enumerate(given)]
            if any(answer != variants[0] for answer, variants in zip(answers, aliases, strict=True)):
                raise ValueError("answer_aliases[i] must start with expected answer i")
        else:
            aliases = [_answer_variants(answer, i) for i, answer in enumerate(answers)]
        return {**data, "expected_answers": [a[0] for a in aliases], "answer_aliases": aliases}

    @field_validator("query_text")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query text is empty")
        return _encodable(value, "query text")

    @field_validator("query_id")
    @classmethod
    def _id_non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query_id is empty")
        return _encodable(value, "query_id")

    @field_validator("expected_answers")
    @classmethod
    def _answers_are_text(cls, value: list[str]) -> list[str]:
        for answer in value:
            _encodable(answer, "expected answer")
        return value

    @field_validator("relevant_doc_ids")
    @classmethod
    def _finite_grades(cls, value: list[str] | dict[str, float] | None) -> list[str] | dict[str, float] | None:
        ids = value if isinstance(value, list) else list(value or {})
        for doc_id in ids:
            if not doc_id.strip():
                raise ValueError("a relevant document id is empty")
            _encodable(doc_id, "relevant document id")
        if isinstance(value, dict):
            for doc_id, grade in value.items():
                if not math.isfinite(grade):
                    raise ValueError(f"grade of {doc_id!r} is {grade}; grades must be finite numbers")
        return value

    @field_validator("relevant_doc_ids", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        return ids_as_strings(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_as_strings(cls, value: Any) -> Any:
        return tags_as_strings(value)

    def aliases_of(self, answer: int) -> tuple[str, ...]:
        """The acceptable strings of expected answer ``answer`` other than its canonical text."""
        if answer < len(self.answer_aliases):
            return tuple(self.answer_aliases[answer][1:])
        return ()

    def judgment_context(self, answer: int, retrieved_text: str) -> JudgmentContext:
        """The context that judges ``retrieved_text`` against expected answer ``answer`` (with its aliases)."""
        return JudgmentContext(query=self.query_text, expected_text=self.expected_answers[answer],
                               retrieved_text=retrieved_text, aliases=self.aliases_of(answer))

    def answers_record(self) -> list[str | list[str]]:
        """``expected_answers`` as a file gives them: a string per one-string answer, a list for one with aliases."""
        return [list(self.answer_aliases[i]) if len(self.aliases_of(i)) else text
                for i, text in enumerate(self.expected_answers)]

    @property
    def relevance(self) -> dict[str, float]:
        """``relevant_doc_ids`` as a mapping id -> grade (grade 1 for a plain list); empty when text-labelled."""
        ids = self.relevant_doc_ids
        if ids is None:
            return {}
        if isinstance(ids, dict):
            return {str(k): float(v) for k, v in ids.items()}
        return {str(i): 1.0 for i in ids}

    @property
    def is_id_labelled(self) -> bool:
        return bool(self.relevant_doc_ids)

    @property
    def is_unlabelled(self) -> bool:
        """Neither expected answers nor relevant ids: only a reference-free judge can score this query."""
        return not self.expected_answers and not self.relevant_doc_ids


def _answer_variants(answer: Any, index: int) -> list[str]:
    """The acceptable strings of one expected answer (a string, or a non-empty list of strings), deduplicated."""
    where = f"expected answer {index + 1}"
    variants = [answer] if isinstance(answer, str) else answer
    if not isinstance(variants, (list, tuple)):
        raise ValueError(f"{where} must be a text or a list of texts, got {type(answer).__name__}")
    if not variants:
        raise ValueError(f"{where} is an empty list of aliases")
    for variant in variants:
        if not isinstance(variant, str):
            raise ValueError(f"{where}: an alias must be a text, got {type(variant).__name__}")
        if not variant.strip():
            raise ValueError(f"{where} is empty" if len(variants) == 1 else f"{where} has an empty alias")
    return list(dict.fromkeys(variants))
