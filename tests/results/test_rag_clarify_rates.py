"""The clarify rates of a RAG results file: which answers they cover (``clarify_rate`` the questions to clarify,
``wrong_clarify_rate`` those to answer), read from the answers' ``clarified`` flag, and when a run has them."""

from __future__ import annotations

from evret_core.contracts.generation import Answer
from evret_core.results.rag_results import (
    ConditionOutcome,
    QuestionOutcome,
    asks_back,
    generation_values,
    outcome_value,
)


def outcome(expected: str, answer: Answer | None, correct: float | None = None) -> ConditionOutcome:
    scores: dict[str, float | None] = {} if answer is None else {"behaviour_ok": correct, "refused": 0.0}
    if correct is not None:
        scores["correct"] = correct
    return ConditionOutcome(context_ids=[], expected_behaviour=expected, answer=answer, scores=scores)


def question(qid: str, oc: ConditionOutcome) -> QuestionOutcome:
    return QuestionOutcome(question_id=qid, question="?", expected_behaviour=oc.expected_behaviour,
                           conditions={"gold": oc})


ASKED = Answer(text="Which one do you mean?", clarified=True)


def test_the_clarified_value_comes_from_the_scored_answer() -> None:
    assert outcome_value(outcome("clarify", ASKED, 1.0), "clarified") == 1.0
    assert outcome_value(outcome("answer", Answer(text="9 am"), 1.0), "clarified") == 0.0
    assert outcome_value(outcome("answer", None), "clarified") is None  # unmeasured: left out
    assert outcome_value(outcome("answer", Answer(text="9 am"), 1.0), "refused") == 0.0  # a stored score


def test_each_clarify_rate_covers_its_questions() -> None:
    questions = [question("q1", outcome("clarify", ASKED, 1.0)),
                 question("q2", outcome("clarify", Answer(text="It opens at 9."), 0.0)),
                 question("q3", outcome("answer", ASKED, 0.0)),
                 question("q4", outcome("answer", Answer(text="9 am"), 1.0)),
                 question("q5", outcome("answer", None)),
                 question("q6", outcome("refuse", ASKED, 0.0))]
    assert generation_values(questions, "gold", "clarify_rate") == [1.0, 0.0]
    assert generation_values(questions, "gold", "wrong_clarify_rate") == [1.0, 0.0]
    # a question to clarify is neither a question to refuse nor one to answer
    assert generation_values(questions, "gold", "correct_refusal_rate") == [0.0]
    assert asks_back(questions) and not asks_back(questions[3:5])
