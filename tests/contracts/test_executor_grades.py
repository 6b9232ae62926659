"""Executor.grade: a graded judge's grades checked against its scale, and the verdicts they give at its cut."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor, grade_chunk, verdict_of
from evret_core.contracts.judge import Judge, JudgmentContext, reference_free_context


class WordsGrade(Judge):
    """Grade = words in the passage // 2, capped at 3; match from grade 2."""

    name = "words-grade"
    reference_free = True
    grades = 3
    cut = 2.0

    def __init__(self, answers: list[float | None] | None = None) -> None:
        self.answers = answers
        self.prepared = 0

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        self.prepared += len(contexts)

    def judge(self, context: JudgmentContext) -> bool:
        grade = self.batch_grade([context])[0]
        return grade is not None and grade >= 2

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        if self.answers is not None:
            return self.answers
        return [float(min(3, len(c.retrieved_text.split()) // 2)) for c in contexts]


def contexts(*texts: str) -> list[JudgmentContext]:
    return [reference_free_context("q", t) for t in texts]


def test_grade_returns_grades_and_the_verdicts_at_the_cut_in_chunks() -> None:
    judge, seen = WordsGrade(), []
    run = Executor().grade(judge, contexts("a", "a b", "a b c d", "a b c d e f g h"), 3, seen.append)
    assert run.grades == [0.0, 1.0, 2.0, 3.0]
    assert run.verdicts == [False, False, True, True]
    assert seen == [3, 4] and judge.prepared == 4


def test_a_judge_without_a_cut_counts_any_positive_grade() -> None:
    class NoCut(WordsGrade):
        cut = None

    assert [verdict_of(NoCut(), g) for g in (0.0, 0.5, None)] == [False, True, None]


@pytest.mark.parametrize("bad", [4.0, -1.0, math.nan, math.inf, True, "2"])
def test_a_grade_outside_the_scale_is_refused(bad: object) -> None:
    with pytest.raises(EvretError, match="outside its scale 0..3"):
        grade_chunk(WordsGrade([bad]), contexts("a"))  # type: ignore[list-item]


def test_a_wrong_number_of_grades_is_refused() -> None:
    with pytest.raises(EvretError, match="returned 1 grades for 2 contexts"):
        grade_chunk(WordsGrade([1.0]), contexts("a", "b"))


def test_unmeasured_grades_stay_unmeasured() -> None:
    run = Executor().grade(WordsGrade([None, 2.0]), contexts("a", "b"), 8, lambda n: None)
    assert run.grades == [None, 2.0] and run.verdicts == [None, True]
