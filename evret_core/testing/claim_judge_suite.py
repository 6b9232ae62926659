"""The claim judge contract, as tests: a claim judge plugin's test class subclasses :class:`ClaimJudgeConformance`.

What the RAG harness relies on: ``judge_claims(tasks)`` gives one list of
:class:`~evret_core.rag.ClaimVerdict` per :class:`~evret_core.rag.ClaimTask`, in order, one verdict per given
claim with its text and citations, a verdict of :data:`~evret_core.contracts.claims.VERDICTS`, supporting ids among the
task's contexts; a claim stated word for word by a context is supported by it, a claim judged against no context
is not; judging tasks together or one at a time (and through ``ajudge_task`` when the judge has it) gives the same
verdicts; a task with a conversation's history still gets one verdict per claim, whose citations stay the claim's
(a message's ``history:{i}:{role}`` id may support a claim, never be a citation); the config is JSON with the
judge's name; the harness runs the judge end to end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.claims import VERDICTS, ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Turn
from evret_core.contracts.generation import Claim, Context
from evret_core.testing.suite import Conformance

MUSEUM = Context("museum", "The museum opens at 9 am. Entry is free on Sundays.")
CAFE = Context("cafe", "The cafe is closed on Mondays.")
PARKING = Context("parking", "Parking costs 3 euros per hour.")


def task(question: str, claims: list[tuple[str, list[str]]], *contexts: Context) -> ClaimTask:
    """A :class:`~evret_core.rag.ClaimTask` of ``claims`` (text, cited ids) over ``contexts``."""
    return ClaimTask(question, tuple(Claim(text=t, citations=c) for t, c in claims), tuple(contexts),
                     answer_text=" ".join(t for t, _ in claims))


class ClaimJudgeConformance(Conformance):
    """Tests every claim judge must pass. Override the ``claim_judge`` fixture; override ``tasks`` when your judge
    needs other examples (keep the first claim of the first task stated word for word by its first context)."""

    kind = kinds.CLAIM_JUDGE

    @pytest.fixture
    def subject(self, claim_judge: Any) -> Any:
        return claim_judge

    @pytest.fixture
    def claim_judge(self) -> Any:
        raise NotImplementedError("override the `claim_judge` fixture to return the claim judge under test")

    @pytest.fixture
    def tasks(self) -> list[ClaimTask]:
        return [
            task("When does the museum open?", [("The museum opens at 9 am", ["museum"])], MUSEUM, CAFE),
            task("How much is parking?", [("Parking costs 3 euros per hour", ["parking", "cafe"]),
                                          ("Parking is free for bicycles", [])], CAFE, PARKING),
            task("When is the cafe closed?", [("The cafe is closed on Mondays", ["cafe"])]),
        ]

    def test_has_a_json_config_with_its_name(self, claim_judge: Any) -> None:
        config = claim_judge.config()
        assert isinstance(config["name"], str) and config["name"]
        json.dumps(config)

    def test_one_verdict_per_claim_in_order(self, claim_judge: Any, tasks: list[ClaimTask]) -> None:
        rows = list(claim_judge.judge_claims(tasks))
        assert len(rows) == len(tasks)
        for t, row in zip(tasks, rows, strict=True):
            assert len(row) == len(t.claims)
            for claim, verdict in zip(t.claims, row, strict=True):
                assert isinstance(verdict, ClaimVerdict)
                assert verdict.claim == claim.text and verdict.citations == list(claim.citations)
                assert verdict.verdict in VERDICTS
                ids = {c.doc_id for c in t.contexts}
                assert set(verdict.supporting) <= ids and set(verdict.contradicting) <= ids
                assert bool(verdict.supporting) == (verdict.verdict == "supported")

    def test_history_is_evidence_never_a_citation(self, claim_judge: Any) -> None:
        history = (Turn("user", "Is the cafe open on Mondays?"), Turn("agent", "The cafe is closed on Mondays."),
                   Turn("user", "And parking?"))
        claims = (Claim(text="Parking costs 3 euros per hour", citations=["parking"]),
                  Claim(text="The cafe is closed on Mondays", citations=["parking"]),
                  Claim(text="Parking is free for bicycles"))
        with_history = ClaimTask("How much is parking?", claims, (PARKING,), answer_text="", history=history)
        [row] = claim_judge.judge_claims([with_history])
        assert len(row) == len(claims)
        ids = {PARKING.doc_id} | {f"history:{i}:{t.role}" for i, t in enumerate(history)}
        for claim, verdict in zip(claims, row, strict=True):
            assert verdict.claim == claim.text and verdict.citations == list(claim.citations)
            assert verdict.verdict in VERDICTS
            assert set(verdict.supporting) <= ids and set(verdict.contradicting) <= ids

    def test_a_stated_claim_is_supported_and_one_without_contexts_is_not(self, claim_judge: Any,
                                                                          tasks: list[ClaimTask]) -> None:
        first = claim_judge.judge_claims(tasks[:1])[0][0]
        assert first.verdict == "supported" and tasks[0].contexts[0].doc_id in first.supporting
        bare = ClaimTask(tasks[0].question, tasks[0].claims, ())
        assert claim_judge.judge_claims([bare])[0][0].verdict != "supported"

    def test_together_or_one_at_a_time_alike(self, claim_judge: Any, tasks: list[ClaimTask]) -> None:
        together = claim_judge.judge_claims(tasks)
        alone = [claim_judge.judge_claims([t])[0] for t in tasks]
        assert alone == together
        ajudge = getattr(claim_judge, "ajudge_task", None)
        if callable(ajudge):
            from evret_core.contracts.aio import run_sync

            async def each() -> list[list[ClaimVerdict]]:
                try:
                    return [await ajudge(t) for t in tasks]
                finally:
                    close = getattr(claim_judge, "aclose", None)
                    if callable(close):
                        await close()

            assert run_sync(each()) == together

    def test_runs_in_the_harness(self, claim_judge: Any) -> None:
        from evret_core.rag import QuestionSet, RagEvaluator

        questions = QuestionSet.from_records(
            [{"id": "q1", "question": "When does the museum open?", "answers": ["9 am"], "gold_doc_ids": ["museum"]},
             {"id": "q2", "question": "When is the cafe closed?", "answers": ["Mondays"], "gold_doc_ids": ["cafe"]}],
            corpus={c.doc_id: {"text": c.text} for c in (MUSEUM, CAFE, PARKING)},
        )
        results = RagEvaluator(conditions=["gold"], claim_judge=claim_judge, n_resamples=20).evaluate(questions)
        assert set(results.per_question) == {"q1", "q2"}
        assert results.config["claim_judge"] == claim_judge.config()
        groundedness = results.generation["gold"]["groundedness"]
        assert groundedness is not None and 0.0 <= groundedness <= 1.0
