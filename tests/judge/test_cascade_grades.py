"""A graded cascade: every stage on the last stage's scale (else refused naming the stage), a judgment settled early
takes that stage's grade, the verdict is grade >= cut, and the cascade says it is graded and reference-free."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext, reference_free_context
from evret_core.evaluation.executors import LocalExecutor
from evret_core.judge.cascade import CascadeJudge, Stage
from evret_core.judge.lexical import ExactJudge
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, always, isolate_llm_env


class TableGrade(Judge):
    """A graded reference-free judge for the tests: grade and score looked up by passage; counts what it is asked."""

    name = "table-grade"
    reference_free = True

    def __init__(self, table: dict[str, tuple[float, int]], grades: int = 3, cut: int = 2) -> None:
        self.table = table
        self.grades = grades
        self.cut = cut
        self.graded: list[str] = []
        self.scored: list[str] = []

    def judge(self, context: JudgmentContext) -> bool:
        return self.table[context.retrieved_text][1] >= self.cut

    def batch_score(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        self.scored += [c.retrieved_text for c in contexts]
        return [self.table[c.retrieved_text][0] for c in contexts]

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        self.graded += [c.retrieved_text for c in contexts]
        return [float(self.table[c.retrieved_text][1]) for c in contexts]


CHEAP = {"far": (0.05, 0), "close": (0.95, 3), "unsure": (0.5, 1), "unsure too": (0.6, 2)}
EXPENSIVE = {"far": (0.0, 1), "close": (1.0, 1), "unsure": (0.0, 2), "unsure too": (0.0, 0)}


def contexts() -> list[JudgmentContext]:
    return [reference_free_context("q", p) for p in CHEAP]


def test_a_judgment_settled_early_takes_that_stages_grade_and_the_rest_the_last_stages() -> None:
    cheap, expensive = TableGrade(CHEAP), TableGrade(EXPENSIVE)
    cascade = CascadeJudge([_stage(cheap, [0.2, 0.9]), expensive])
    assert cascade.batch_grade(contexts()) == [0.0, 3.0, 2.0, 0.0]
    assert cheap.graded == ["far", "close"]  # asked for the grades of what its band settles only
    assert expensive.graded == ["unsure", "unsure too"]  # the last stage sees the band only
    assert cascade.batch_judge(contexts()) == [False, True, True, False]  # grade >= cut (2)
    assert [cascade.settled_by(c) for c in contexts()] == ["table-grade"] * 4
    stats = cascade.stats()
    assert stats["last_judge_calls"] == 4 and stats["judgments"] == 8  # two batches of four


def test_the_cascade_is_graded_on_the_last_stages_scale_and_reference_free_when_every_stage_is() -> None:
    cascade = CascadeJudge([_stage(TableGrade(CHEAP), [0.2, 0.9]), TableGrade(EXPENSIVE, cut=3)])
    assert (cascade.grades, cascade.cut, cascade.reference_free) == (3, 3, True)
    run = LocalExecutor().grade(cascade, contexts(), 3, lambda done: None)  # through the checked grade path
    assert run.grades == [0.0, 3.0, 2.0, 0.0] and run.verdicts == [False, True, False, False]
    yes_no = CascadeJudge([{"name": "exact", "band": [0.0, 0.5]}, "contains"])
    assert (yes_no.grades, yes_no.cut, yes_no.reference_free) == (None, None, False)
    context = JudgmentContext(query="q", expected_text="a", retrieved_text="a")
    assert yes_no.batch_grade([context]) == [1.0]  # a yes/no cascade grades as its verdicts


@pytest.mark.parametrize(("first", "named"), [
    (ExactJudge(), "stage 1 ('exact') judges yes/no"),
    (TableGrade(CHEAP, grades=4), "stage 1 ('table-grade') judges 0-4"),
])
def test_a_stage_off_the_last_stages_scale_is_refused_naming_it(first: Judge, named: str) -> None:
    with pytest.raises(EvretError, match=re.escape(named) + ".*same scale"):
        CascadeJudge([_stage(first, [0.2, 0.9]), TableGrade(EXPENSIVE)])


def test_a_graded_stage_before_a_yes_no_last_stage_keeps_the_yes_no_cascade() -> None:
    cascade = CascadeJudge([_stage(TableGrade(CHEAP), [0.2, 0.9]), ExactJudge()])
    assert cascade.grades is None
    got = cascade.batch_judge([JudgmentContext(query="q", expected_text="x", retrieved_text="close"),
                               JudgmentContext(query="q", expected_text="unsure", retrieved_text="unsure")])
    assert got == [True, True]


def test_a_middle_stage_without_a_grade_sends_the_judgment_on() -> None:
    class Ungraded(TableGrade):
        def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
            return [None for _ in contexts]

    cheap, expensive = Ungraded(CHEAP), TableGrade(EXPENSIVE)
    cascade = CascadeJudge([_stage(cheap, [0.2, 0.9]), expensive])
    assert cascade.batch_grade(contexts()) == [1.0, 1.0, 2.0, 0.0]
    assert expensive.graded == list(CHEAP)  # in their order


def test_relevance_behind_a_graded_stage_against_a_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer(always(json.dumps({"grade": 1}))) as server:
        cascade = CascadeJudge([_stage(TableGrade(CHEAP), [0.2, 0.9]),
                                {"name": "relevance", **stub_options(server), "cache": False}])
        assert (cascade.grades, cascade.cut, cascade.reference_free) == (3, 2, True)
        assert cascade.batch_grade(contexts()) == [0.0, 3.0, 1.0, 1.0]
        assert len(server.requests) == 2  # only the two judgments in the band reached the model


def _stage(judge: Judge, band: list[float]) -> Stage:
    return Stage(judge=judge, band=(band[0], band[1]))
