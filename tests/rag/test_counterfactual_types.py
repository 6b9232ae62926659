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
    ("France", ("place:country", "")), ("Croatia", ("place:country", "")), ("Rhine Valley", ("place:land:valley", "")),
    ("Basel", ("place:city", "")), ("Africa", ("place:continent", "")), ("Normandy", ("place:region", "")),
    ("the shipowner Clara Vos", ("name", "")), ("parallel to the canalized Rhine", ("other", "phrase")),
    ("Cologne, Germany", ("place:city", "")), ("Tethys sea", ("place:water:sea", "")),
    ("Lake Constance", ("place:water:lake", "")),
    ("Kingdom of Sicily", ("place:region", "")), ("Sybilla of Normandy", ("name", "")), ("Noord River", ("place:water:river", "")),
    ("King Malcolm III of Scotland", ("name", "")), ("University of Paris", ("organisation", "")),
    ("the Welsh", ("group", "")), ("Normans", ("group", "")), ("HoloLens", ("name", "")),
    ("fighting horsemen", ("other", "gerund")), ("water level", ("other", "phrase")), ("dammed", ("other", "verb")), ("eastwards", ("other", "direction")),
])
def test_shapes(text: str, expected: tuple[str, str]) -> None:
    assert shape(text) == expected


def test_question_cues_refine_names() -> None:
    assert value_type("Rollo", "Who gave the settlers a common identity?") == ("person", "person")
    # "where" alone does not say what kind of place; a name's own words or the question's noun do
    assert value_type("Diepoldsau", "Where was the Rhine regulated with an upper canal?") == ("place", "place")
    assert value_type("Zaltbommel", "Between Brakel and what other city is it?") == ("place", "place:city")
    assert value_type("Germany", "Where does the Rhine meet the Neckar?") == ("place", "place:country")
    assert value_type("Ice Ages", "What period was 2.5 million years ago?") == ("name", "date")
    assert value_type("the shipowner Clara Vos", "Who founded the library in 1887?") == ("person", "person")
    assert question_cue("After 1935, who would be forbidden to enter Rhineland?") == "person"
    assert question_cue("What was the Norman religion?") == "culture:religion"
    assert question_cue("What is the Norman architecture idiom?") == "culture:style"
    assert question_cue("What continent are the Canarian Islands off the coast of?") == "place:continent"
    assert question_cue("How far in advance must visits be booked?") == "number:far"
    assert question_cue("What has shortened the Rhine river?") is None  # the river is what was shortened
    assert question_cue("What is the famous rock called that the Rhine flows around?") == "place:land:rock"
    assert question_cue("What is the largest suspension bridge in Germany?") == "place:built:bridge"
    assert question_cue("What was the name of the castle?") == "place:built:castle"  # naming only as a last resort
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
    # a value whose type says nothing in particular gets no planting of "the same type" (issue 33): 249 of 386
    assert len(built) >= 0.6 * answerable
    asked = {q.question_id: q.question for q in questions.questions}
    for q, c in built:
        planted = c.info["planted_answer"]
        assert planted.lower() not in q.question.lower()
        verdict = check_planting(c.info["original_answer"], planted, q.question, asked.get(c.info["planted_from"]))
        assert c.info["type_consistent"] is verdict[0] is True, (q.question, c.info)
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
    # nothing with the head or the question's noun, and "which border does the river flow along" asks for no type
    # (the river is its subject): nothing is planted ("constant flooding" for a border would be spotted at once)
    cases = build_cases(adversarial_conditions(["counterfactual"], base="gold"), small(ROWS), None, k=5,
                        seed=0)["counterfactual"]
    assert cases[0].skip == ("counterfactual: no other value of the answer's type (other (phrase/)) to plant, and its "
                             "question asks for nothing in particular")


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


# -- issue 33 (newcomer item 5): plantings marked type_consistent are the same type ------------------------------------
@pytest.mark.parametrize(("original", "planted", "question", "planted_question", "ok"), [
    # the bundled example's three: a person replaced by a time phrase and phrases answering other questions
    ("the shipowner Clara Vos", "a week in advance", "Who founded the library in 1887?",
     "How far in advance must archive visits be booked?", False),
    ("a week in advance", "a photo ID and a proof of address", "How far in advance must archive visits be booked?",
     "What do I need to bring to get a library card?", False),
    ("a photo ID and a proof of address", "a week in advance", "What do I need to bring to get a library card?",
     "How far in advance must archive visits be booked?", False),
    ("Africa", "Lower Lorraine", "What continent are the Canarian Islands off the coast of?",
     "The Rhine flowed through Swabia, Franconia and what other location in the 10th Century?", False),
    ("loess", "pollution", "What is the term for wind-blown dust in a tundra?",
     "What did industry do to the Rhine until the 1980s?", False),
    ("Romanesque", "Catholicism", "What is the Norman architecture idiom?", "What was the Norman religion?", False),
    ("Zaltbommel", "the Romantic Rhine", "Between Brakel and what other city can the tide be seen?",
     "What is the area called near the Rhine Gorge?", False),
    ("Moselle", "Rhine-Meuse", "Which of the tributaries in Germany contributes most?",
     "What is the name of the Delta in the Netherlands?", False),                  # a river, a delta
    ("Lorelei", "Lindau", "What is the famous rock called that the Rhine flows around?",
     "What is the Island off of the German shore of the Rhine?", False),          # a rock, an island
    ("Cologne, Germany", "Denmark, Iceland and Norway", "What is the largest city the Rhine runs through?",
     "From which countries did the Norse originate?", False),
    ("canalisation projects", "freshwater lake", "What has shortened the Rhine river?",
     "What did the Zuider Zee brackish lagoon change into?", False),              # neither asks for a river
    ("Sargans", "the Welsh", "What is the natural dam that the Rhine flows through?",
     "Who was Ralph in charge of being at war with?", False),                      # a place, a people
    ("Moselle", "Fu\u00dfach", "Which of the tributaries in Germany contributes most?",
     "What is the lower canal regulation of the Rhine?", False),                  # asks for a regulation
    ("Alter Rhein", "Rhine-Meuse", "What delimits the delta of the Rhine in the west?",
     "What is the name of the Delta in the Netherlands?", False),
    ("Rollo", "Bohemond", "Who gave the settlers a common identity?", "Who led the Normans to Antioch?", True),
    ("the shipowner Clara Vos", "Bishop Odo", "Who founded the library?", "Who commissioned the Tapestry?", True),
    ("Germany", "Switzerland", "Where does the Rhine meet the Neckar?", "Which country has the most factories?", True),
    ("Middle Rhine", "Lower Rhine", "What flows between Bingen and Bonn?", "What flows between Bingen and Bonn?",
     True),                                                                   # the same head noun
    ("1066", "1185", "When was the battle?", "When did the Normans attack Dyrrachium?", True),
])
def test_checker_with_the_questions(original: str, planted: str, question: str, planted_question: str,
                                    ok: bool) -> None:
    assert check_planting(original, planted, question, planted_question)[0] is ok


def test_the_bundled_example_plants_no_value_of_another_type(tmp_path: object) -> None:
    """r05 ("Who founded the library?") was planted "a week in advance", r07 and r09 each other's answers, all
    marked type_consistent; with no other person or value of their type in the set they are skipped, saying why."""
    from .conftest import EXAMPLE

    questions = QuestionSet.load(EXAMPLE / "questions.jsonl", EXAMPLE / "corpus.jsonl")
    cases = build_cases(adversarial_conditions(["counterfactual"], base="gold"), questions, None, k=5,
                        seed=0)["counterfactual"]
    by_id = dict(zip((q.question_id for q in questions.questions), cases, strict=True))
    assert by_id["r05"].skip == "counterfactual: no other value of the answer's type (person) to plant"
    for qid in ("r07", "r09"):
        assert by_id[qid].skip is not None and by_id[qid].skip.startswith("counterfactual: no other value"), qid
    planted = {qid: c.info for qid, c in by_id.items() if not c.skip}
    assert set(planted) == {"r01", "r02", "r04", "r08"}
    assert all(info["type_consistent"] and info["rule"] == "shifted" for info in planted.values())


def test_a_who_question_gets_a_person_not_a_phrase() -> None:
    rows = [("q1", "Who founded the abbey?", "the monk Odo of Bayeux", "The abbey was founded by the monk Odo of "
             "Bayeux."),
            ("q2", "How far in advance must visits be booked?", "a week in advance", "Book a week in advance."),
            ("q3", "Who commissioned the tapestry?", "Bishop Odo", "Bishop Odo commissioned the tapestry."),
            ("q4", "Who was the hostage?", "Duncan", "The hostage was Duncan.")]
    questions = small(rows)
    got = {plant(questions, "q1", seed)["planted_answer"] for seed in range(8)}
    assert got <= {"Bishop Odo", "Duncan"} and got


def test_a_numeral_is_no_head_noun() -> None:
    from evret_core.rag.perturb.answer_types import head_of

    assert head_of("William II") is None and head_of("World War 2") is None  # "William II" -> "War II" was planted
    rows = [("q1", "Who killed Harold II?", "William II", "Harold II was killed by William II."),
            ("q2", "Who was the hostage?", "Duncan", "The hostage was Duncan.")]
    assert plant(small(rows, {"x": "After World War II the bridge was rebuilt."}))["planted_answer"] == "Duncan"


def test_moved_ordinals_keep_their_suffix_and_sentence_openers_are_no_names() -> None:
    for seed in range(10):
        moved = shifted("11th", *shape("11th"), np.random.default_rng(seed))
        assert moved is not None
        n = int(re.match(r"\d+", moved).group())  # type: ignore[union-attr]
        assert moved == f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
    rows = [("q1", "What part of the Rhine flows through Bonn?", "Lower Rhine", "The Lower Rhine flows through Bonn."),
            ("q2", "Who was the hostage?", "Duncan", "The hostage was Duncan.")]
    extra = {"x": "Currently Rhine ships carry coal. The Alpine Rhine is short."}
    assert {plant(small(rows, extra), "q1", seed)["planted_answer"] for seed in range(6)} == {"Alpine Rhine"}


def test_the_hand_judged_sample_in_the_docs_is_what_the_planter_plants() -> None:
    """docs/benchmarks.md's 40 plantings judged by hand (issue 33) are the ones its command prints today."""
    import importlib.util
    import sys

    from .conftest import EXAMPLE, REPO

    spec = importlib.util.spec_from_file_location("adversarial_bench", REPO / "benchmarks" / "adversarial.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["adversarial_bench"] = bench
    spec.loader.exec_module(bench)
    sets = [QuestionSet.load(squad_path()), QuestionSet.load(EXAMPLE / "questions.jsonl", EXAMPLE / "corpus.jsonl")]
    printed = [line.split(" | ") for line in bench.plantings(sets, 40, seed=2026).splitlines()
               if re.match(r"^\| \d+ \|", line)]
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text[text.index("### Counterfactual plantings: same type by the question (issue 33)"):]
    recorded = [line.split(" | ") for line in section.splitlines() if re.match(r"^\| \d+ \|", line)][:40]
    assert len(printed) == len(recorded) == 40
    for now, then in zip(printed, recorded, strict=True):
        assert now[2:5] == then[1:4], (now, then)  # question, original, planted
    assert sum(row[-1].startswith(" yes") or row[-1].startswith("yes") for row in recorded) >= 36
