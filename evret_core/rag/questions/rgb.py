"""Import counterfactual-robustness question sets in the RGB shape (Chen et al. 2023, "Benchmarking Large Language
Models in Retrieval-Augmented Generation").

One JSON object per line: ``id``, ``query``, ``answer`` (a string, a list of acceptable strings, or a list of
answers each a string or a list of aliases), ``positive`` (passages that hold the answer), ``negative`` (passages
that do not), and in the counterfactual subset ``fakeanswer`` (a string or a list) and ``positive_wrong`` (the
positive passages with the answer altered to the fake one). Each question becomes a :class:`RagQuestion` whose gold
documents are its positive passages; every passage joins the corpus (``<id>-pos-<n>``, ``<id>-neg-<n>``), so a
retriever sees the negatives as distractors; ``fakeanswer`` and ``positive_wrong`` become the question's
``counterfactual_answers`` and ``counterfactual_passages``, which the ``counterfactual`` family plants as they are.
Errors name the file and line: an ``id`` that is NaN or infinite (``NaN``, ``1e400``) is one. A record whose fake
answer is one of its answers is kept for the other conditions and left out of the counterfactual one, with one
warning in the question set's ``warnings`` (the count and the first ``file:line``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.jsonio import iter_json_lines
from evret_core.rag.questions.question_sets import (
    QuestionSet,
    RagQuestion,
    fake_answer_warnings,
    question_from_record,
)

FIELDS = ("id", "query", "answer", "positive", "negative", "fakeanswer", "positive_wrong")


def _strings(value: Any, field: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvretError(f"{where}: field {field!r} must be a string or a list of strings")
    return [v for v in value if v.strip()]


def rgb_answers(value: Any, where: str) -> list[list[str]]:
    """RGB's ``answer`` as answers with aliases: a string is one answer; a list of strings is one answer's aliases;
    a list holding lists is several answers (information-integration questions), each a string or its aliases."""
    if isinstance(value, str):
        return [[value]] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [[v for v in value if v.strip()]] if any(v.strip() for v in value) else []
    if isinstance(value, list):
        out = []
        for item in value:
            aliases = _strings(item, "answer", where)
            if aliases:
                out.append(aliases)
        return out
    raise EvretError(f"{where}: field 'answer' must be a string or a list (of strings or of lists of strings)")


def rgb_question(record: Any, where: str, corpus: dict[str, dict[str, str]]) -> RagQuestion:
    """One RGB record as a question; its passages are added to ``corpus``."""
    if not isinstance(record, dict):
        raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
    unknown = sorted(set(record) - set(FIELDS))
    if unknown:
        raise EvretError(f"{where}: unknown field(s) {', '.join(unknown)}; an RGB record has {', '.join(FIELDS)}")
    query = record.get("query")
    if not isinstance(query, str) or not query.strip():
        raise EvretError(f"{where}: field 'query' is missing or not a non-empty string")
    if record.get("id") in (None, "") or isinstance(record.get("id"), (dict, list, bool)):
        raise EvretError(f"{where}: field 'id' is missing or not a string or number")
    if isinstance(record["id"], float) and not math.isfinite(record["id"]):
        # JSON has no NaN or infinity; Python's reader takes NaN, Infinity and 1e400, which str() made 'nan', 'inf'
        shown = "NaN" if math.isnan(record["id"]) else "Infinity" if record["id"] > 0 else "-Infinity"
        raise EvretError(f"{where}: field 'id' is {shown}; give a string or a finite number")
    qid = str(record["id"])
    answers = rgb_answers(record.get("answer"), where)
    if not answers:
        raise EvretError(f"{where}: field 'answer' is missing or empty")
    gold = []
    for kind, field in (("pos", "positive"), ("neg", "negative")):
        for n, passage in enumerate(_strings(record.get(field), field, where)):
            doc_id = f"{qid}-{kind}-{n}"
            corpus[doc_id] = {"title": "", "text": passage}
            if kind == "pos":
                gold.append(doc_id)
    fake = _strings(record.get("fakeanswer"), "fakeanswer", where)
    wrong = _strings(record.get("positive_wrong"), "positive_wrong", where)
    tags = {"subset": "counterfactual" if fake or wrong else "plain"}
    return question_from_record({"question_id": qid, "question": query, "answers": answers, "gold_doc_ids": gold,
                                 "tags": tags, "counterfactual_answers": fake, "counterfactual_passages": wrong},
                                where)


def read_rgb(path: str | Path) -> QuestionSet:
    """An RGB-format file (one JSON object per line, whatever its suffix) as a question set with its corpus."""
    path = Path(path)
    corpus: dict[str, dict[str, str]] = {}
    questions: list[RagQuestion] = []
    lines: dict[str, str] = {}
    for _lineno, where, record in iter_json_lines(path, what="RGB file"):
        question = rgb_question(record, where, corpus)
        if question.question_id in lines:
            raise EvretError(f"{where}: duplicate id {question.question_id!r} (first at {lines[question.question_id]})")
        lines[question.question_id] = where
        questions.append(question)
    if not questions:
        raise EvretError(f"{path}: the RGB file has no records")
    return QuestionSet(questions=questions, corpus=corpus, name=path.stem,
                       warnings=fake_answer_warnings(questions, lines))
