"""SQuAD 2.0 exact match and token F1, checked against cases computed by hand from the official definitions
(normalise: lower, drop punctuation, drop the articles a/an/the, collapse whitespace; F1 over tokens with
multiplicity; maximum over the gold answers; an unanswerable question's gold is the empty string)."""

from __future__ import annotations

import pytest

from evret_core.rag.scores.answers import (
    answer_is_correct,
    behaviour_ok,
    exact_match,
    normalize_answer,
    numbers_disagree,
    quantities,
    squad_scores,
    token_f1,
)


@pytest.mark.parametrize(("text", "normalised"), [
    ("The  Quick, brown fox!", "quick brown fox"),
    ("An apple a day", "apple day"),
    ("theater", "theater"),            # articles only as whole words
    ("U.S. Army", "us army"),           # punctuation removed inside words
    ("  \tThe\n", ""),
])
def test_normalize_answer(text: str, normalised: str) -> None:
    assert normalize_answer(text) == normalised


def test_token_f1_by_hand() -> None:
    # "cat sat" vs "cat sat down": 2 shared, P = 2/2, R = 2/3 -> F1 = 2 * 1 * 2/3 / (5/3) = 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    # multiplicity: "x x y" vs "x y y" share one x and one y: P = R = 2/3
    assert token_f1("x x y", "x y y") == pytest.approx(2 / 3)
    # 8 predicted tokens holding the 4 gold tokens: P = 1/2, R = 1 -> 2/3
    assert token_f1("in the 10th and 11th centuries gave their name", "10th and 11th centuries") == pytest.approx(2 / 3)
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("the", "") == 1.0  # both normalise to nothing
    assert token_f1("", "France") == 0.0 and token_f1("France", "") == 0.0


def test_max_over_gold_answers_and_unanswerable() -> None:
    # gold 1 "10th century": P = 2/3, R = 1 -> 0.8; gold 2 "first half of 10th century": P = 2/3, R = 2/5 -> 0.5
    em, f1 = squad_scores("in the 10th century", ["10th century", "the first half of the 10th century"])
    assert (em, f1) == (0.0, pytest.approx(0.8))
    assert squad_scores("the 10th century", ["10th century", "x"]) == (1.0, 1.0)
    assert squad_scores("", []) == (1.0, 1.0)               # unanswerable, abstained
    assert squad_scores("France", []) == (0.0, 0.0)         # unanswerable, answered
    assert squad_scores("", ["France"]) == (0.0, 0.0)       # answerable, abstained
    assert squad_scores("x", ["  ", "."]) == (0.0, 0.0)     # golds that normalise to nothing count as ""
    assert exact_match("Denmark, Iceland and Norway", "denmark iceland and norway") == 1.0


def test_behaviour() -> None:
    assert behaviour_ok("answer", refused=False, escalated=False)
    assert not behaviour_ok("answer", refused=True, escalated=False)
    assert behaviour_ok("refuse", refused=True, escalated=False)
    assert behaviour_ok("refuse", refused=False, escalated=True)
    assert not behaviour_ok("escalate", refused=True, escalated=False)
    assert behaviour_ok("escalate", refused=False, escalated=True)


# -- issue 33 (newcomer item 12): the default `correct` verdict ----------------------------------------------------
@pytest.mark.parametrize(("prediction", "golds", "question", "right"), [
    ("5 pm, and it is closed", ["5 pm", "5pm", "five pm"], "At what time does the library close on Saturdays?", True),
    ("up to twelve", ["twelve", "12", "twelve items"], "How many items can a card holder borrow at a time?", True),
    ("2 euros per item", ["5 euros per item"], "How much does a reservation cost?", False),  # F1 0.75, wrong number
    ("The library closes at 5 pm on Saturdays.", ["5 pm"], "At what time does the library close on Saturdays?",
     True),                                               # the question's words do not make an answer long
    ("It was in 1067.", ["1066"], "When was the battle?", False),
    ("I believe it was 1041.", ["in 1041"], "When did he arrive?", True),  # a leading "in" of the gold may go
    ("5 pm or 8 pm", ["5 pm"], "When does it close?", False),             # an alternative offered is a hedge
    ("Rollo, William, Richard, Robert Guiscard", ["Rollo"], "Who was the first duke?", False),  # not short
    ("1945", ["May 1945"], "When did the war end in Europe?", True),      # less said is not a disagreement (F1)
    ("one ninth", ["four ninth"], "How much of the flow?", False),
    ("the 10th century", ["10th century"], "When?", True),
    ("", ["France"], "Where?", False),
])
def test_answer_is_correct(prediction: str, golds: list[str], question: str, right: bool) -> None:
    assert answer_is_correct(prediction, golds, 0.5, question) is right


@pytest.mark.parametrize(("text", "values"), [
    ("5pm", {5}), ("twelve items", {12}), ("twenty-five", {25}), ("two hundred and fifty", {250}),
    ("three thousand four hundred and two", {3402}), ("a dozen eggs", {12}), ("2 million people", {2_000_000}),
    ("1,230 km (760 mi)", {1230, 760}), ("the 10th century", {10}), ("the first half", {1}), ("1990s", {1990}),
    ("one ninth", {1, 9}), ("twenty first", {21}), ("3.5%", {3.5}), ("it may rain", set()),
])
def test_quantities(text: str, values: set[float]) -> None:
    assert {v for kind, v in quantities(text) if kind == "number"} == values
    assert ("month", 5.0) in quantities("May 1945") and not numbers_disagree("1945", "May 1945")
    assert numbers_disagree("2 euros", "5 euros") and not numbers_disagree("5 pm, 9 am on Sundays", "5 pm")
