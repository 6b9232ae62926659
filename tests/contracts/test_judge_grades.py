"""Grades in the judge contract: a graded judge's scale and cut, the default grades of a yes/no judge, and the
context a judge that needs no expected answer is given."""

from __future__ import annotations

from evret_core.contracts.judge import Judge, JudgmentContext, reference_free_context


class Contains(Judge):
    name = "contains-test"

    def judge(self, context: JudgmentContext) -> bool:
        return context.expected_text in context.retrieved_text


def test_a_yes_no_judge_grades_its_verdicts_as_one_and_zero() -> None:
    judge = Contains()
    contexts = [JudgmentContext(query="q", expected_text="cat", retrieved_text=t) for t in ("a cat", "a dog")]
    assert judge.batch_grade(contexts) == [1.0, 0.0]
    assert (judge.reference_free, judge.grades, judge.cut) == (False, None, None)


def test_a_reference_free_context_has_no_expected_answer() -> None:
    context = reference_free_context("what is a cat?", "a cat is a small mammal")
    assert (context.query, context.expected_text, context.retrieved_text, context.aliases) == (
        "what is a cat?", "", "a cat is a small mammal", ())
