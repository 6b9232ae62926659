"""QuestionSet.check_gold_ids: an empty answer means every gold id resolves, so a set without a corpus cannot give
one when it has gold ids (issue 24)."""

from __future__ import annotations

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.rag import QuestionSet

RECORDS = [
    {"question_id": "q1", "question": "Who lays the eggs?", "answers": [["the queen"]], "gold_doc_ids": ["d1"]},
    {"question_id": "q2", "question": "What are drones?", "answers": [["male bees"]], "gold_doc_ids": ["d9"]},
]
CORPUS = {"d1": {"title": "Queen", "text": "The queen lays the eggs."}}


def test_missing_gold_ids_are_listed_with_a_corpus() -> None:
    qs = QuestionSet(questions=QuestionSet.from_records(RECORDS).questions, corpus=CORPUS)
    assert qs.check_gold_ids() == ["q2: d9"]
    assert QuestionSet.from_records(RECORDS[:1], CORPUS).check_gold_ids() == []


def test_without_a_corpus_gold_ids_are_not_reported_as_resolved() -> None:
    qs = QuestionSet.from_records(RECORDS)  # read without its corpus: allowed, but nothing can be checked
    with pytest.raises(EvretError, match=r"2 question\(s\) have gold ids .* no corpus to check them against"):
        qs.check_gold_ids()
    no_ids = QuestionSet.from_records([{"question_id": "r", "question": "Who?", "answers": [["me"]]}])
    assert no_ids.check_gold_ids() == []  # no gold id at all: every one of them resolves
