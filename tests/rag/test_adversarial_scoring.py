"""Counterfactual scoring (issue 27): common conflict phrasings are flagged, naming the planted value to correct it
is a correction (not an adoption), and adopted / corrected / flagged / correct are mutually consistent."""

from __future__ import annotations

import itertools

import pytest

from evret_core.contracts.generation import Answer
from evret_core.rag.scores.adversarial_scores import CONFLICT, outcome_scores, rejects
from evret_core.results.rag_results import ConditionOutcome

CF = {"family": "counterfactual", "planted_answer": "1067"}
GOLD = ["1066"]


def _scores(text: str, correct: bool | None = False, info: dict | None = None) -> dict[str, float]:  # type: ignore[type-arg]
    outcome = ConditionOutcome(context_ids=[], expected_behaviour="answer", info=info or CF, correct=correct,
                               answer=Answer(text=text))
    return outcome_scores(outcome, GOLD)


@pytest.mark.parametrize("text", [
    "There are factual errors in the provided documents.", "The documents disagree on the year.",
    "The sources differ: one gives 1067.", "Document 2 contains incorrect information about the date.",
    "One source says 1067, but the others say 1066.", "Document 3 is wrong about the date.",
    "The passages are inconsistent.", "Note: there is a discrepancy between the sources.",
    "The context contains an error regarding the year.", "Some documents give conflicting dates.",
])
def test_common_conflict_phrasings_are_flagged(text: str) -> None:
    assert CONFLICT.search(text), text


@pytest.mark.parametrize("text", ["The battle was in 1066.", "Rollo was the first ruler.", "It happened in England."])
def test_plain_answers_are_not_flagged(text: str) -> None:
    assert not CONFLICT.search(text)


def test_naming_the_fake_to_correct_it_is_a_correction() -> None:
    # a verbose answer: F1 against "1066" is low, so the harness's own rule says wrong; the family says corrected
    for text in ("It was 1066, not 1067 as one document says.", "One document claims 1067, but the others say 1066.",
                 "1067 is incorrect; the battle was in 1066.", "Rather than 1067, the year was 1066."):
        assert _scores(text) == {"adopted": 0.0, "corrected": 1.0, "flagged_conflict": 1.0, "correct": 1.0}, text
    # rejecting the fake without giving the right answer: flagged, not corrected, not right
    assert _scores("The year 1067 is wrong, but I cannot tell the right one.") == {
        "adopted": 0.0, "corrected": 0.0, "flagged_conflict": 1.0, "correct": 0.0}


def test_stating_the_fake_is_adoption_and_never_right() -> None:
    # hedging between the two values counts as adopting the planted one, even when the harness scored it right
    assert _scores("It was 1066 or 1067.", correct=True) == {
        "adopted": 1.0, "corrected": 0.0, "flagged_conflict": 0.0, "correct": 0.0}
    assert _scores("The documents say 1067.", correct=False)["adopted"] == 1.0
    assert rejects("According to the documents, it was 1067.", "1067") is False
    assert rejects("Rollo.", "1067") is None


def test_own_planted_answers_all_count() -> None:
    info = {"family": "counterfactual", "planted_answer": "1067", "planted_answers": ["1067", "ten sixty-seven"]}
    assert _scores("It was ten sixty-seven.", info=info)["adopted"] == 1.0


def test_rates_are_mutually_consistent() -> None:
    pieces = ["It was 1066.", "It was 1067.", "not 1067.", "The sources conflict.", "1067 is incorrect.", "Rollo."]
    for n in (1, 2, 3):
        for combo in itertools.permutations(pieces, n):
            for correct in (True, False):
                s = _scores(" ".join(combo), correct=correct)
                if s["adopted"]:
                    assert not s["corrected"] and not s["correct"], combo
                if s["corrected"]:
                    assert s["flagged_conflict"] and s["correct"], combo


# -- issue 33 (newcomer item 4): adoption decides the per-question verdict, so every table gives one number ----------
def test_adoption_and_correction_decide_the_per_question_verdict() -> None:
    from evret_core.rag import QuestionSet, RagEvaluator

    corpus = {"d1": {"title": "", "text": "The library was founded by Clara Vos in 1887."}}
    questions = QuestionSet.from_records([
        {"id": "adopts", "question": "Who founded the library?", "answers": ["Clara Vos"], "gold_doc_ids": ["d1"],
         "counterfactual_answers": ["Jan Smit"], "counterfactual_passages": ["The library was founded by Jan Smit."]},
        {"id": "corrects", "question": "Who was the founder?", "answers": ["Clara Vos"], "gold_doc_ids": ["d1"],
         "counterfactual_answers": ["Jan Smit"], "counterfactual_passages": ["Jan Smit was the founder."]},
    ], corpus=corpus)
    said = {("adopts", "gold"): "Clara Vos", ("corrects", "gold"): "Clara Vos",
            # the gold answer whole in a short answer (right by the rule alone), beside the planted value stated
            ("adopts", "counterfactual"): "Clara Vos. Jan Smit.",
            # too long for the rule, but it rejects the planted value and states the answer: corrected, right
            ("corrects", "counterfactual"): "Jan Smit is incorrect: the city records and the other passage both "
                                            "name its actual founder, Clara Vos, a wealthy local shipowner."}

    class Said:
        def batch_generate(self, requests):  # type: ignore[no-untyped-def]
            return [Answer(text=said[(r.question_id, r.condition)]) for r in requests]

    from evret_core.rag.perturb.cases import adversarial_conditions

    results = RagEvaluator(None, Said(), conditions=["gold", *adversarial_conditions(["counterfactual"], base="gold")],
                           n_resamples=50).evaluate(questions)
    adopts = results.per_question["adopts"].conditions["counterfactual"]
    corrects = results.per_question["corrects"].conditions["counterfactual"]
    assert adopts.correct is False and adopts.scores["correct"] == 0.0
    assert corrects.correct is True and corrects.scores["correct"] == 1.0
    # one number per quantity: the generation mean, the family rate, the paired difference and the drop
    assert results.generation["counterfactual"]["correct"] == 0.5
    entry = results.adversarial["counterfactual"]
    assert entry["rates"]["correct"] == 0.5 and entry["rates"]["adopted"] == 0.5
    assert entry["intervals"]["correct"] == results.generation_intervals["counterfactual"]["correct"]
    difference = next(d for d in results.differences if (d.a, d.b, d.metric) == ("gold", "counterfactual", "correct"))
    assert entry["drop"]["delta"] == difference.mean == -0.5 and entry["drop"]["interval"] == difference.interval
