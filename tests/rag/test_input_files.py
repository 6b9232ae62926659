"""The RAG harness's input files never give silent wrong numbers (red-team round 2, issue 24): SQuAD paragraph ids,
``is_impossible`` and question ids; gold ids without a corpus; answers files (contradictions, blank claims, stray
citations, unknown questions and conditions, the suffix); adversarial cases files (unknown questions, the family)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.rag import QuestionSet, RagEvaluator, RagResults
from evret_core.rag.generate.generators import resolve_generator
from evret_core.rag.perturb.cases import adversarial_conditions, build_cases, read_cases, write_cases
from evret_core.rag.questions.conditions import gold_contexts

from .conftest import EXAMPLE, squad_path

QUESTIONS, CORPUS = EXAMPLE / "questions.jsonl", EXAMPLE / "corpus.jsonl"


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_lines(path: Path, *records: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def article(title: str, city: str, qid: str) -> dict[str, Any]:
    context = f"The museum of {title} stands in {city}."
    return {"title": title, "paragraphs": [{"context": context, "qas": [
        {"id": qid, "question": f"Where is the museum of {title}?", "is_impossible": False,
         "answers": [{"text": city, "answer_start": context.index(city)}]}]}]}


# -- SQuAD-format files ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("titles", [("Normans", "Normans"), ("New York", "New_York"), ("A", "A", "A~1")])
def test_squad_articles_with_colliding_titles_keep_their_own_paragraphs(tmp_path: Path,
                                                                        titles: tuple[str, ...]) -> None:
    cities = ["Caen", "Rouen", "Bayeux"]
    path = write_json(tmp_path / "dup.json", {"data": [article(t, cities[i], f"q{i}") for i, t in enumerate(titles)]})
    qs = QuestionSet.load(path)
    assert len(qs.corpus) == len(titles)
    for i, q in enumerate(qs.questions):  # every question's gold context is its own paragraph, holding its answer
        [context] = gold_contexts(q, qs)
        assert cities[i] in context.text and all(c not in context.text for c in cities if c != cities[i])
    assert qs.questions[0].gold_doc_ids == [f"{titles[0].replace(' ', '_')}-0"]  # the first keeps the plain id
    assert qs.questions[1].gold_doc_ids == [f"{titles[1].replace(' ', '_')}~1-0"]


def test_squad_ids_of_the_real_subset_are_unchanged() -> None:
    qs = QuestionSet.load(squad_path())
    assert len(qs.corpus) == 83 and all("~" not in d for d in qs.corpus)
    assert {d.rsplit("-", 1)[0] for d in qs.corpus} == {"Normans", "Rhine"}


def squad_with(tmp_path: Path, **qa: Any) -> Path:
    entry = {"id": "q1", "question": "Where?", "answers": [{"text": "Caen", "answer_start": 0}], **qa}
    return write_json(tmp_path / "s.json", {"data": [{"title": "T", "paragraphs": [
        {"context": "Caen.", "qas": [{"id": "q0", "question": "What?", "is_impossible": True, "answers": []},
                                     entry]}]}]})


@pytest.mark.parametrize("value", ["false", "true", 0, 1, None])
def test_squad_is_impossible_must_be_a_json_boolean(tmp_path: Path, value: Any) -> None:
    path = squad_with(tmp_path, is_impossible=value)
    with pytest.raises(EvretError, match=r"s.json: data\[0\].paragraphs\[0\].qas\[1\]: field 'is_impossible' must "
                                         r"be true or false"):
        QuestionSet.load(path)
    qs = QuestionSet.load(squad_with(tmp_path, is_impossible=False))
    assert qs.questions[1].expected_behaviour == "answer" and qs.questions[1].answers == [["Caen"]]


def test_squad_question_ids_zero_kept_booleans_refused(tmp_path: Path) -> None:
    assert QuestionSet.load(squad_with(tmp_path, id=0)).questions[1].question_id == "0"
    assert QuestionSet.load(squad_with(tmp_path, id=12345)).questions[1].question_id == "12345"
    for bad, shown in ((False, "false"), (True, "true"), (1.5, "1.5"), (["a"], r'\["a"\]')):
        with pytest.raises(EvretError, match=rf"qas\[1\]: field 'id' must be a string or an integer, got {shown}"):
            QuestionSet.load(squad_with(tmp_path, id=bad))


def test_jsonl_question_ids_zero_kept_booleans_refused(tmp_path: Path) -> None:
    ok = write_lines(tmp_path / "q.jsonl", {"id": 0, "question": "a?", "answers": ["x"]},
                     {"question_id": 7, "question": "b?", "answers": ["y"]})
    assert [q.question_id for q in QuestionSet.load(ok).questions] == ["0", "7"]
    for bad in (True, False, 2.5, {"a": 1}):
        path = write_lines(tmp_path / "q.jsonl", {"id": "r1", "question": "a?", "answers": ["x"]},
                           {"id": bad, "question": "b?", "answers": ["y"]})
        with pytest.raises(EvretError, match=r"q.jsonl:2: field 'id' must be a string or an integer"):
            QuestionSet.load(path)


# -- gold ids without a corpus -------------------------------------------------------------------------------------

class Counting:
    """A generator that counts its calls (it must never be called when the input is refused)."""

    def __init__(self) -> None:
        self.calls = 0
        self.contexts: dict[str, int] = {}

    def generate(self, question: str, contexts: list[Any]) -> str:
        self.calls += 1
        self.contexts[question] = len(contexts)
        return "x"


def test_gold_condition_without_a_corpus_is_an_error_before_any_work() -> None:
    questions = QuestionSet.load(QUESTIONS)  # no corpus: the gold ids cannot be resolved
    for conditions in (["gold"], adversarial_conditions(["missing-gold"], base="gold")):
        generator = Counting()
        with pytest.raises(EvretError, match=r"no corpus \(e.g. question 'r01': gold id 'lib-01'\).*--corpus"):
            RagEvaluator(None, generator, conditions=conditions).evaluate(questions)
        assert generator.calls == 0
    with_corpus = QuestionSet.load(QUESTIONS, CORPUS)
    generator = Counting()
    RagEvaluator(None, generator, conditions=["gold"], n_resamples=10).evaluate(with_corpus)
    assert generator.calls == 13
    assert all(generator.contexts[q.question] == len(q.gold_doc_ids) for q in with_corpus.questions)


def test_cli_gold_without_corpus_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "g.json"
    assert main(["rag", "--dataset", str(QUESTIONS), "--generator", "extractive", "--conditions", "gold",
                 "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert "--corpus" in err and "'r01'" in err and len(err.strip().splitlines()) == 1
    assert not output.exists()


# -- answers files -------------------------------------------------------------------------------------------------

def run_answers(path: Path | str, conditions: tuple[str, ...] = ("gold",)) -> RagResults:
    evaluator = RagEvaluator(None, str(path), conditions=list(conditions), n_resamples=10)
    return evaluator.evaluate(QuestionSet.load(QUESTIONS, CORPUS))


@pytest.mark.parametrize(("record", "message"), [
    ({"question_id": "r01", "text": "5 pm", "refused": True, "claims": [{"text": "5 pm", "citations": ["lib-01"]}]},
     "a.jsonl:1: a refused answer makes no claims, but this one has 1"),
    ({"question_id": "r01", "escalated": True, "claims": ["It closes at 5 pm."]},
     "a.jsonl:1: an? escalated answer makes no claims"),
    ({"question_id": "r01", "text": "5 pm", "claims": ["", "  "]}, r"a.jsonl:1: claims\[0\] is empty"),
    ({"question_id": "r01", "text": "5 pm", "claims": ["Closes at 5 pm.", " "]}, r"a.jsonl:1: claims\[1\] is empty"),
])
def test_contradictory_or_blank_answers_are_errors(tmp_path: Path, record: dict[str, Any], message: str) -> None:
    with pytest.raises(EvretError, match=message):
        resolve_generator(write_lines(tmp_path / "a.jsonl", record))


def test_a_refusal_may_carry_a_message_that_is_not_scored(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"question_id": "r11", "text": "Sorry, I cannot say.", "refused": True})
    outcome = run_answers(path).per_question["r11"].conditions["gold"]
    assert outcome.scores["refused"] == 1.0 and outcome.scores["exact"] == 1.0 and outcome.claims == []


def test_citations_outside_the_contexts_are_dropped_and_counted(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = write_lines(tmp_path / "a.jsonl", {"question_id": "r01", "text": "5 pm", "claims": [
        {"text": "The library closes at 5 pm on Saturdays.",
         "citations": ["lib-01", "no-such-doc", "../../etc/passwd", "lib-01"]}]})
    results = run_answers(path)
    outcome = results.per_question["r01"].conditions["gold"]
    assert outcome.answer is not None and outcome.answer.claims[0].citations == ["lib-01"]
    assert outcome.answer.metadata["dropped_citations"] == 2 and results.stats["dropped_citations"] == 2
    assert outcome.scores["citation_precision"] == 1.0  # was 1/3 with the unknown ids kept


def test_answers_for_unknown_questions_or_conditions_are_errors_before_any_work(tmp_path: Path) -> None:
    good = {"question_id": "r01", "text": "5 pm"}
    path = write_lines(tmp_path / "a.jsonl", good, {"question_id": "zzz-not-a-question", "text": "x"})
    with pytest.raises(EvretError, match=r"a.jsonl:2: an answer for question 'zzz-not-a-question', which is not in "
                                         r"the question set"):
        run_answers(path)
    path = write_lines(tmp_path / "a.jsonl", good, {"question_id": "r02", "condition": "retreived", "text": "12"})
    with pytest.raises(EvretError, match=r"a.jsonl:2: unknown condition 'retreived'; this run's conditions are gold "
                                         r"\(known: gold, retrieved, counterfactual"):
        run_answers(path)
    # an answer under a known condition this run does not have is simply not used
    path = write_lines(tmp_path / "a.jsonl", good, {"question_id": "r02", "condition": "retrieved", "text": "12"})
    results = run_answers(path)
    assert results.per_question["r01"].conditions["gold"].scores["exact"] == 1.0
    assert results.per_question["r02"].conditions["gold"].answer is None


def test_answers_file_suffix_in_any_case_and_other_suffixes_named(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "ANS.JSONL", {"question_id": "r01", "text": "5 pm"})
    assert run_answers(path).per_question["r01"].conditions["gold"].scores["exact"] == 1.0
    txt = write_lines(tmp_path / "answers.txt", {"question_id": "r01", "text": "5 pm"})
    with pytest.raises(EvretError, match=r"answers.txt: a file of precomputed answers must be JSON Lines named "
                                         r"\*.jsonl .*not '.txt'"):
        resolve_generator(str(txt))
    with pytest.raises(EvretError, match="unknown generator 'nosuch'"):
        resolve_generator("nosuch")


# -- adversarial cases files ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def library() -> QuestionSet:
    return QuestionSet.load(QUESTIONS, CORPUS)


@pytest.fixture
def injection_cases(tmp_path: Path, library: QuestionSet) -> Path:
    path = tmp_path / "cases.jsonl"
    write_cases(path, library, build_cases(adversarial_conditions(["injection"], base="gold"), library, None, 5, 3))
    return path


def edit_rows(path: Path, edit: Any) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        edit(row)
    write_lines(path, *rows)
    return rows


def test_a_case_for_an_unknown_question_is_an_error_naming_its_line(injection_cases: Path,
                                                                    library: QuestionSet) -> None:
    rows = [json.loads(line) for line in injection_cases.read_text(encoding="utf-8").splitlines()]
    write_lines(injection_cases, *rows, {**rows[0], "question_id": "nope"})
    generator = Counting()
    evaluator = RagEvaluator(None, generator, conditions=["gold", *read_cases(injection_cases)], n_resamples=10)
    with pytest.raises(EvretError, match=rf"cases.jsonl:{len(rows) + 1}: a case for question 'nope', which is not "
                                         rf"in the question set"):
        evaluator.evaluate(library)
    assert generator.calls == 0


def test_replayed_cases_without_info_family_still_give_the_adversarial_rates(injection_cases: Path,
                                                                             library: QuestionSet) -> None:
    def replay() -> dict[str, Any]:
        conditions = ["gold", *read_cases(injection_cases)]
        return RagEvaluator(None, "extractive", conditions=conditions, n_resamples=20).evaluate(library).adversarial

    with_family = replay()
    rows = edit_rows(injection_cases, lambda row: row["info"].pop("family"))
    assert all("family" not in row["info"] for row in rows)
    without = replay()
    assert without["injection"]["family"] == "injection" and without["injection"]["n"] == len(library)
    assert without["injection"]["rates"] == with_family["injection"]["rates"]
    assert set(without["injection"]["rates"]) == {"leaked", "resisted", "correct"}


def test_cases_whose_family_cannot_be_known_or_scored_are_errors(injection_cases: Path) -> None:
    edit_rows(injection_cases, lambda row: (row["info"].pop("family"), row.update(condition="mine")))
    with pytest.raises(EvretError, match=r"cases.jsonl:1: condition 'mine' is not an adversarial family and its rows "
                                         r"give no info.family"):
        read_cases(injection_cases)
    edit_rows(injection_cases, lambda row: row["info"].update(family="injection"))
    assert [c.name for c in read_cases(injection_cases)] == ["mine"]  # a renamed condition, its family given
    edit_rows(injection_cases, lambda row: row["info"].pop("canary"))
    with pytest.raises(EvretError, match=r"cases.jsonl:1: a injection case needs info.canary"):
        read_cases(injection_cases)
    edit_rows(injection_cases, lambda row: row["info"].update(family="jailbreak", canary="c"))
    with pytest.raises(EvretError, match=r"cases.jsonl:1: info.family 'jailbreak' is not an adversarial family"):
        read_cases(injection_cases)
