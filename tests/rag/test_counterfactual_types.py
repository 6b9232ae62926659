"""Counterfactuals plant a value of the answer's own type (issue 27): the type rules, the checker, the planter on
the SQuAD subset (share of type-consistent plantings, never a substring of the question), and shifted numbers."""

from __future__ import annotations

import numpy as np
import pytest

from evret_core.rag import QuestionSet
from evret_core.rag.adversarial_cases import adversarial_conditions, build_cases
from evret_core.rag.answer_types import check_planting, question_cue, shape, value_type
from evret_core.rag.counterfactual import shifted

from .conftest import squad_path


@pytest.mark.parametrize(("text", "expected"), [
    ("1066", ("date", "year")), ("1050s", ("date", "decade")), ("10th century", ("date", "century")),
    ("10th and 11th centuries", ("date", "century")), ("Nov 17, 2019", ("date", "day+month+year")),
    ("4 July 1776", ("date", "day+month+year")), ("AD 14", ("date", "era+year")),
    ("30,000 people", ("number", "people")), ("$5 million", ("number", "$")), ("120 m", ("number", "m")),
    ("eight", ("number", "")), ("Toy Story 4", ("name", "")), ("World War II", ("name", "")),
    ("France", ("place:region", "")), ("Croatia", ("place:region", "")), ("Rhine Valley", ("place:land", "")),
    ("Kingdom of Sicily", ("place:region", "")), ("Sybilla of Normandy", ("name", "")), ("Noord River", ("place:water", "")),
    ("King Malcolm III of Scotland", ("name", "")), ("University of Paris", ("organisation", "")),
    ("the Welsh", ("group", "")), ("Normans", ("group", "")), ("HoloLens", ("name", "")),
    ("fighting horsemen", ("other", "gerund")), ("water level", ("other", "phrase")), ("dammed", ("other", "verb")), ("eastwards", ("other", "direction")),
])
def test_shapes(text: str, expected: tuple[str, str]) -> None:
    assert shape(text) == expected


def test_question_cues_refine_names() -> None:
    assert value_type("Rollo", "Who gave the settlers a common identity?") == ("person", "person")
    assert value_type("Diepoldsau", "Where was the Rhine regulated with an upper canal?") == ("place", "place:region")
    assert value_type("Ice Ages", "What period was 2.5 million years ago?") == ("name", "date")
    assert question_cue("After 1935, who would be forbidden to enter Rhineland?") == "person"
    assert question_cue("What was the Norman religion?") == "culture"
    assert question_cue("What is the largest suspension bridge in Germany?") == "place:built"
    assert question_cue("What was the name of the castle?") == "place:built"  # naming only as a last resort
    assert question_cue("What is the Dutch name for the Rhine?") == "naming"
    assert question_cue("What increased in the Rhine because of the land clearance?") is None


@pytest.mark.parametrize(("original", "planted", "ok"), [
    ("France", "Amer", False), ("Tim Cook", "Croatia", False), ("Nov 17, 2019", "Toy Story 4", False),
    ("120 m", "1,230 km", False), ("1066", "10th century", False), ("30,000", "early 11th century", False),
    ("Rollo", "Bohemond", True), ("120 m", "400 m", True), ("1066", "1185", True), ("France", "Croatia", True),
])
def test_checker_by_hand(original: str, planted: str, ok: bool) -> None:
    assert check_planting(original, planted)[0] is ok


def test_shifted_keeps_unit_and_format() -> None:
    rng = np.random.default_rng(3)
    assert shifted("1,230 km (760 mi)", *shape("1,230 km (760 mi)"), rng) == "2,460 km (1520 mi)"
    for text in ("1050s", "6th century BC", "September 1944", "380 years", "Two thirds", "400 m (1,300 ft)."):
        moved = shifted(text, *shape(text), np.random.default_rng(0))
        assert moved is not None and moved != text and shape(moved) == shape(text), (text, moved)


def test_squad_plantings_keep_their_type_and_avoid_the_question() -> None:
    questions = QuestionSet.from_squad(squad_path())
    cases = build_cases(adversarial_conditions(["counterfactual"], base="gold"), questions, None, k=5,
                        seed=0)["counterfactual"]
    built = [(q, c) for q, c in zip(questions.questions, cases, strict=True) if not c.skip]
    answerable = sum(bool(q.answers) for q in questions.questions)
    assert len(built) >= answerable - 2  # the number fallback leaves almost nothing skipped (385 of 386)
    consistent = sum(check_planting(c.info["original_answer"], c.info["planted_answer"])[0] for _q, c in built)
    assert consistent / len(built) >= 0.95
    for q, c in built:
        planted = c.info["planted_answer"]
        assert planted.lower() not in q.question.lower()
        assert c.info["type_consistent"] == check_planting(c.info["original_answer"], planted)[0]
    # the refused fragments of SQuAD's plausible answers ('Amer') are never planted
    assert not any(c.info["planted_answer"] == "Amer" for _q, c in built)
