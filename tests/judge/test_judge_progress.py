"""A judge's long work before judging (prepare) reaches the evaluator's progress callback (issue 24, problem 2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample
from evret_core.contracts.judge import JudgmentContext, judge_progress, report_progress
from evret_core.judge import ContainsJudge
from evret_core.testing import JudgeConformance


class PreparingJudge(ContainsJudge):
    """``contains``, with a prepare() that reports a unit of work per distinct retrieved text, as an embedding
    judge reports its encodes."""

    name = "preparing"

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        texts = list(dict.fromkeys(c.retrieved_text for c in contexts))
        for done in range(1, len(texts) + 1):
            report_progress("encode", done, len(texts))


def dataset() -> tuple[EvaluationDataset, dict[str, list[dict[str, Any]]]]:
    docs = {f"d{i}": f"passage number {i} about topic {i % 3}" for i in range(6)}
    queries = [QueryExample(query_id=f"q{i}", query_text=f"question {i}", expected_answers=[f"topic {i % 3}"])
               for i in range(4)]
    run = {q.query_id: [{"doc_id": d, "text": t} for d, t in docs.items()] for q in queries}
    return EvaluationDataset(queries=queries), run


def test_prepare_progress_reaches_the_evaluator_before_judging() -> None:
    data, run = dataset()
    seen: list[tuple[str, int, int]] = []
    evaluator = Evaluator(run, metrics=["recall@6"], judge=PreparingJudge(), judge_batch_size=8,
                          progress=lambda stage, done, total: seen.append((stage, done, total)))
    results = evaluator.evaluate(data)
    encode = [e for e in seen if e[0] == "encode"]
    assert encode == [("encode", i, 6) for i in range(1, 7)]  # the 6 distinct passages, one step each
    assert seen[0] == ("judge", 0, 24)  # the judge stage starts before prepare(): its encoding is inside it
    first_judged = next(i for i, e in enumerate(seen) if e[0] == "judge" and e[1] > 0)
    assert seen.index(encode[-1]) < first_judged  # the encoding is reported before the first judged chunk
    assert seen[-1] == ("judge", 24, 24)
    assert results.scores["recall@6"] == 1.0


def test_without_a_listener_reporting_is_a_no_op() -> None:
    data, run = dataset()
    report_progress("encode", 1, 2)  # outside any evaluation: nothing to call, no error
    results = Evaluator(run, metrics=["recall@6"], judge=PreparingJudge()).evaluate(data)  # no progress given
    assert results.scores["recall@6"] == 1.0


def test_the_listener_is_scoped_to_the_block() -> None:
    got: list[tuple[str, int, int]] = []
    with judge_progress(lambda *event: got.append(event)):
        report_progress("encode", 1, 3)
        with judge_progress(None):  # an inner evaluation without progress hides the outer listener
            report_progress("encode", 2, 3)
        report_progress("encode", 3, 3)
    report_progress("encode", 4, 4)
    assert got == [("encode", 1, 3), ("encode", 3, 3)]


def test_a_failing_stage_still_restores_the_listener() -> None:
    got: list[tuple[str, int, int]] = []
    with pytest.raises(RuntimeError), judge_progress(lambda *event: got.append(event)):
        raise RuntimeError("judge failed")
    report_progress("encode", 1, 1)
    assert got == []


class TestPreparingJudgeConformance(JudgeConformance):
    """A judge that reports progress still passes the contract with no one listening."""

    @pytest.fixture
    def judge(self) -> PreparingJudge:
        return PreparingJudge()
