"""Counterfactuals plant a value of the answer's own type (issue 27): the type rules, the checker, the planter on
the SQuAD subset (share of type-consistent plantings, never a substring of the question), and shifted numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from evret_core.rag import QuestionSet
from evret_core.rag.perturb.answer_types import check_planting, question_cue, shape, value_type
from evret_core.rag.perturb.cases import adversarial_conditions, build_cases
from evret_core.rag.perturb.counterfactual import shifted

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


def test_shifted_coordinates_stay_valid() -> None:
    point = "47\u00b039\u2032N 9\u00b019\u2032E / 47.650\u00b0N 9.317\u00b0E / 47.650; 9.317"
    for seed in range(6):
        moved = shifted(point, *shape(point), np.random.default_rng(seed))
        assert moved is not None and moved != point and shape(moved) == shape(point)
        lat, lon = (int(x) for x in re.findall(r"(\d+)\u00b0\d", moved))
        assert 0 <= lat <= 90 and moved.count(f"{lat}\u00b039\u2032N") == 1 and f"/ {lat}.650; {lon}.317" in moved
        assert "\u2032" in moved and "39\u2032" in moved and "19\u2032" in moved  # minutes kept


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


# -- plantings a reader takes for the same kind of thing (issue 27 follow-up) ------------------------------------------

def test_head_nouns_of_values_and_questions() -> None:
    from evret_core.rag.perturb.answer_types import head_of, question_head

    assert head_of("Swiss-Austrian border") == ("border", ["Swiss-Austrian"], "")
    assert head_of("greater density of cold water") == ("density", ["greater"], " of cold water")
    assert head_of("loess") is None and head_of("the Rhine") is None
    assert question_head("Which border does the Rhine flow from the south?") == "border"
    assert question_head("What is the conventional method to measure the Rhine?") == "method"
    assert question_head("What type of Delta is the Rhine-Meuse?") == "delta"
    assert question_head("What river joins the Rhine in Duisburg?") == "river"  # "joins" is the verb
    assert question_head("What is the region called that is the largest conurbation?") == "region"
    assert question_head("What is the Dutch name for the Rhine?") is None  # a generic noun asks for nothing
    assert question_head("When was the bridge opened?") is None


def plant(questions: QuestionSet, qid: str = "q1", seed: int = 0) -> dict[str, object]:
    cases = build_cases(adversarial_conditions(["counterfactual"], base="gold"), questions, None, k=5,
                        seed=seed)["counterfactual"]
    case = next(c for q, c in zip(questions.questions, cases, strict=True) if q.question_id == qid)
    assert not case.skip, case.skip
    return case.info


def small(rows: list[tuple[str, str, str, str]], extra: dict[str, str] | None = None) -> QuestionSet:
    """Questions (id, question, answer, gold text), each with its own gold document, plus ``extra`` documents."""
    from evret_core.rag import RagQuestion

    corpus = {f"d-{qid}": {"text": text} for qid, _q, _a, text in rows}
    corpus.update({k: {"text": v} for k, v in (extra or {}).items()})
    return QuestionSet(questions=[RagQuestion(question_id=qid, question=q, answers=[[a]], gold_doc_ids=[f"d-{qid}"])
                                  for qid, q, a, _t in rows], corpus=corpus, name="t")


ROWS = [
    ("q1", "Which border does the river flow along?", "Swiss-Austrian border",
     "The river flows along the Swiss-Austrian border for 40 km."),
    ("q2", "Why was the river regulated?", "constant flooding", "The river was regulated after constant flooding."),
    ("q3", "What did the city build?", "new harbour", "The city built a new harbour in 1890."),
]


def test_a_phrase_is_replaced_by_a_corpus_phrase_with_the_same_head() -> None:
    info = plant(small(ROWS, {"x": "Trade crossed the Franco-German border. The border was closed."}))
    assert info["planted_answer"] == "Franco-German border" and info["rule"] == "same-head"
    assert info["planted_from"] == "corpus" and info["type_consistent"] is True


def test_a_phrase_without_a_same_head_phrase_takes_an_answer_to_the_same_kind_of_question() -> None:
    rows = [*ROWS, ("q4", "Which border did the army cross?", "northern frontier",
                    "The army crossed the northern frontier in spring.")]
    info = plant(small(rows))
    assert info["planted_answer"] == "northern frontier" and info["rule"] == "question-head"
    assert info["planted_from"] == "q4"
    without = plant(small(ROWS))  # nothing with the head or the question's noun: the same type, as before
    assert without["rule"] == "same-type" and without["planted_answer"] in ("constant flooding", "new harbour")


def test_names_keep_their_head_but_not_in_another_language() -> None:
    rows = [("q1", "What flows between Bingen and Bonn?", "Middle Rhine", "The Middle Rhine flows between them."),
            ("q2", "Who founded the abbey?", "Saint Odo", "Saint Odo founded the abbey.")]
    extra = {"x": "In German Rhine is Rhein. The Lower Rhine is wide; the Dutch Rhine splits."}
    info = plant(small(rows, extra))
    assert info["planted_answer"] == "Lower Rhine" and info["rule"] == "same-head"


def test_one_value_is_not_replaced_by_a_list_nor_by_its_own_stem() -> None:
    rows = [("q1", "Who was Margaret's brother?", "Edgar", "Margaret's brother was Edgar."),
            ("q2", "Who were the two abbots?", "William and John", "The abbots were William and John."),
            ("q3", "Who was the hostage?", "Duncan", "The hostage was Duncan."),
            ("q4", "What was the Norman religion?", "Catholicism", "The Normans adopted Catholicism."),
            ("q5", "What religion were the Normans?", "Catholic", "The Normans were Catholic."),
            ("q6", "What religion did the Goths follow?", "Arianism", "The Goths followed Arianism.")]
    questions = small(rows)
    assert {plant(questions, "q1", seed)["planted_answer"] for seed in range(8)} == {"Duncan"}
    assert {plant(questions, "q4", seed)["planted_answer"] for seed in range(8)} == {"Arianism"}
    years = small([("q1", "When was the scale introduced?", "1939", "The scale was introduced in 1939."),
                   ("q2", "When was the Rhine measured?", "1421 to 1904", "It was measured from 1421 to 1904."),
                   ("q3", "When was the bridge built?", "1880", "The bridge was built in 1880.")])
    assert {plant(years, "q1", seed)["planted_answer"] for seed in range(8)} == {"1880"}


def test_squad_phrases_and_names_keep_their_head_noun() -> None:
    from evret_core.rag.perturb.answer_types import head_of

    questions = QuestionSet.from_squad(squad_path())
    cases = build_cases(adversarial_conditions(["counterfactual"], base="gold"), questions, None, k=5,
                        seed=0)["counterfactual"]
    infos = [c.info for c in cases if not c.skip]
    same_head = [i for i in infos if i["rule"] == "same-head"]
    assert len(same_head) >= 40 and sum(i["rule"] == "question-head" for i in infos) >= 20
    for info in same_head:
        original, planted = head_of(str(info["original_answer"])), head_of(str(info["planted_answer"]))
        assert original and planted and original[0] == planted[0] and len(original[1]) == len(planted[1]), info
