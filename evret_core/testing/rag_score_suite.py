"""The RAG score contract, as tests: a RAG score plugin's test class subclasses :class:`RagScoreConformance`.

What the harness relies on: the score, registered under ``name``, declares its ``metrics``; for each
:class:`~evret_core.rag.ScoreInput` it returns a mapping of some of them to numbers or None, the same when asked
again, leaving its input as it was; the config is JSON with its name; in a run its metrics appear in the results'
``generation`` means and (a plugin's all of them) in the terminal table.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any, ClassVar

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.claims import ClaimVerdict
from evret_core.contracts.generation import Answer, Claim, Context
from evret_core.contracts.rag_score import ScoreInput
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion
from evret_core.testing.suite import Conformance

MUSEUM = Context("museum", "The museum opens at 9 am. Entry is free on Sundays.")
CAFE = Context("cafe", "The cafe is closed on Mondays.")
OPENS = RagQuestion(question_id="q1", question="When does the museum open?", answers=[["9 am"]],
                    gold_doc_ids=["museum"])
FRESCO = RagQuestion(question_id="q2", question="Who painted the fresco?", answers=[],
                     expected_behaviour="refuse")


class RagScoreConformance(Conformance):
    """Set ``name`` (the registered name); override the ``items`` fixture when your score needs other examples."""

    kind = kinds.RAG_SCORE

    @pytest.fixture
    def subject(self) -> Any:
        return self.make()

    @pytest.fixture
    def registered_name(self) -> str | None:
        return self.name

    name: ClassVar[str] = ""

    def make(self) -> Any:
        from evret_core.plugins.registry import create_rag_score

        if not self.name:
            raise NotImplementedError("set `name` to the registered RAG score")
        return create_rag_score(self.name)

    @pytest.fixture
    def items(self) -> list[ScoreInput]:
        claim = Claim(text="The museum opens at 9 am", citations=["museum"])
        return [
            ScoreInput(OPENS, "gold", (MUSEUM, CAFE), Answer(text="The museum opens at 9 am.", claims=[claim]),
                       (ClaimVerdict(claim=claim.text, citations=["museum"], verdict="supported",
                                     supporting=["museum"]),), "answer"),
            ScoreInput(OPENS, "retrieved", (CAFE,), Answer(text="It opens at noon."),
                       (ClaimVerdict(claim="It opens at noon.", citations=[], verdict="unsupported"),), "answer"),
            ScoreInput(FRESCO, "gold", (CAFE,), Answer(text="", refused=True), (), "refuse"),
        ]

    def test_declares_its_metrics_and_a_json_config(self) -> None:
        score = self.make()
        assert score.name == self.name or score.config()["name"]
        assert score.metrics and all(isinstance(m, str) and m for m in score.metrics)
        assert len(set(score.metrics)) == len(score.metrics)
        json.dumps(score.config())

    def test_returns_declared_numbers_or_none_the_same_again(self, items: list[ScoreInput]) -> None:
        score = self.make()
        for item in items:
            before = repr(item)
            got = dict(score.score(item))
            assert set(got) <= set(score.metrics), f"undeclared scores {set(got) - set(score.metrics)}"
            for key, value in got.items():
                assert value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)), key
            again = dict(score.score(item))
            assert {k: None if v is None or math.isnan(v) else v for k, v in again.items()} == \
                {k: None if v is None or math.isnan(v) else v for k, v in got.items()}
            assert repr(item) == before, "the score changed its input"

    def test_appears_in_a_run_and_its_table(self) -> None:
        from evret_core.rag import RagEvaluator
        from evret_core.report.rag_tables import print_rag

        questions = QuestionSet(name="conformance", corpus={c.doc_id: {"text": c.text} for c in (MUSEUM, CAFE)},
                                questions=[OPENS, FRESCO])
        results = RagEvaluator(conditions=["gold"], n_resamples=20).evaluate(questions)
        score = self.make()
        measured = [m for m in score.metrics if m in results.generation["gold"]]
        assert measured, f"none of {score.metrics} in the results"
        out = io.StringIO()
        print_rag(results, file=out)
        assert any(f"  {m} " in out.getvalue() for m in measured), "none of its metrics in the terminal table"
