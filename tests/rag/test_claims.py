"""Generation judging: claim verdicts by the lexical judge, and the scores derived from them."""

from __future__ import annotations

import math

import pytest

from evret_core import Judge, JudgmentContext
from evret_core.rag import Answer, Claim, ClaimTask, ClaimVerdict, Context, LexicalClaimJudge, claim_scores
from evret_core.rag.claims.claim_judges import claims_of

CONTEXTS = (Context("d1", "The library closes at 5 pm on Saturdays."), Context("d2", "Films are lent for a week."))


def test_lexical_judge_finds_every_supporting_context() -> None:
    task = ClaimTask("When?", (Claim(text="closes at 5 pm on Saturdays", citations=["d2"]),
                               Claim(text="The cafe serves soup every day.", citations=["d1"])), CONTEXTS)
    [[supported, unsupported]] = LexicalClaimJudge().judge_claims([task])
    assert (supported.verdict, supported.supporting) == ("supported", ["d1"])
    assert (unsupported.verdict, unsupported.supporting) == ("unsupported", [])
    # the cited d2 does not support claim 1, and claim 2 is unsupported: nothing is cited well
    scores = claim_scores([supported, unsupported])
    assert scores == {"groundedness": 0.5, "faithfulness": 0.0, "contradiction_rate": 0.0,
                      "citation_precision": 0.0, "citation_recall": 0.0}


def test_claim_scores_by_hand() -> None:
    verdicts = [
        ClaimVerdict("a", ["d1", "d2"], "supported", supporting=["d1"]),   # 1 of 2 citations good; recalled
        ClaimVerdict("b", ["d3"], "supported", supporting=["d3", "d4"]),   # 1 of 1 good; recalled
        ClaimVerdict("c", [], "contradicted", contradicting=["d1"]),       # no citation
        ClaimVerdict("d", ["d1"], "unmeasured"),                           # left out everywhere
    ]
    scores = claim_scores(verdicts)
    assert scores["groundedness"] == pytest.approx(2 / 3)
    assert scores["faithfulness"] == 0.0             # one claim is not supported
    assert scores["contradiction_rate"] == pytest.approx(1 / 3)
    assert scores["citation_precision"] == pytest.approx(2 / 3)
    assert scores["citation_recall"] == pytest.approx(2 / 3)
    # all supported: faithful; without citations precision does not apply
    assert claim_scores([ClaimVerdict("a", [], "supported", ["d1"])])["faithfulness"] == 1.0
    assert math.isnan(claim_scores([ClaimVerdict("a", [], "supported", ["d1"])])["citation_precision"])
    assert all(math.isnan(v) for v in claim_scores([]).values())


def test_claims_of_an_answer() -> None:
    assert [c.text for c in claims_of(Answer(text="It opens at 9. It closes at 5 pm."))] == [
        "It opens at 9.", "It closes at 5 pm."]
    assert claims_of(Answer(text="I cannot say.", refused=True)) == ()
    assert claims_of(Answer(text="x", claims=[Claim(text="y", citations=["d1"])]))[0].citations == ["d1"]


def test_any_registered_judge_and_unmeasured_verdicts() -> None:
    class Flaky(Judge):
        name = "flaky"

        def judge(self, context: JudgmentContext) -> bool:
            raise AssertionError("batch_judge is used")

        def batch_judge(self, contexts):  # type: ignore[no-untyped-def]
            return [None if "Films" in c.retrieved_text else False for c in contexts]

    [[verdict]] = LexicalClaimJudge(Flaky()).judge_claims([ClaimTask("q", (Claim(text="x"),), CONTEXTS)])
    assert verdict.verdict == "unmeasured"
    [[exact]] = LexicalClaimJudge("exact").judge_claims(
        [ClaimTask("q", (Claim(text="films are LENT for a week."),), CONTEXTS)])
    assert exact.supporting == ["d2"]
    assert LexicalClaimJudge().config()["judge"]["query_boost"] is False
