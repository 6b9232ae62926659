"""How the RAG report shows a clarifying answer: its own verdict word, coloured by ``correct`` like a refusal's, and
not among the refused or escalated ones."""

from __future__ import annotations

from evret_core.contracts.generation import Answer
from evret_core.report.rag_document import REFUSED, verdict
from evret_core.results.rag_results import ConditionOutcome

ASKED = Answer(text="Which one do you mean?", clarified=True)


def outcome(expected: str, answer: Answer, correct: float) -> ConditionOutcome:
    return ConditionOutcome(context_ids=[], expected_behaviour=expected, answer=answer, correct=bool(correct),
                            scores={"behaviour_ok": correct, "refused": 0.0, "correct": correct})


def test_a_clarifying_answer_has_its_own_verdict() -> None:
    right = verdict(outcome("clarify", ASKED, 1.0), {})
    wrong = verdict(outcome("answer", ASKED, 0.0), {})
    assert (right["short"], right["long"], right["cls"]) == ("clarified", "right: clarified", "v-rr")
    assert (wrong["short"], wrong["long"], wrong["cls"]) == ("clarified", "wrong: clarified", "v-rw")
    assert not right["mask"] & REFUSED and not wrong["mask"] & REFUSED
