"""Generators: the extractive baseline, the user's own pipeline (function, object, precomputed JSONL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.rag import Answer, Context, ExtractiveGenerator, GenerationRequest, PrecomputedGenerator
from evret_core.rag.generate.extractive import answer_span
from evret_core.rag.generate.generators import CallableGenerator, ObjectGenerator, resolve_generator
from evret_core.text import split_sentences

CONTEXTS = (
    Context("d1", "The library opens at 9 am. On Saturdays it closes at 5 pm."),
    Context("d2", "Books are lent for three weeks and films for one week."),
)


def request(question: str, contexts: tuple[Context, ...] = CONTEXTS, condition: str = "gold") -> GenerationRequest:
    return GenerationRequest("q1", question, contexts, condition)


def test_split_sentences() -> None:
    assert split_sentences('He said "Go." Then 3 left! Why? ok.\nNext line') == [
        'He said "Go."', "Then 3 left!", "Why? ok.", "Next line"]
    assert split_sentences("   ") == []


def test_extractive_answers_from_the_best_sentence_and_cites_it() -> None:
    answer = ExtractiveGenerator().generate(request("How long are films lent for?"))
    assert not answer.refused
    assert answer.claims[0].text == "Books are lent for three weeks and films for one week."
    assert answer.claims[0].citations == ["d2"]
    assert answer.text in ("three weeks", "one week")  # a number-bearing run next to the question's words
    assert ExtractiveGenerator(answer="sentence").generate(request("How long are films lent for?")).text == \
        answer.claims[0].text


def test_extractive_refuses_below_threshold_and_without_context() -> None:
    off_topic = ExtractiveGenerator().generate(request("What is the head librarian's phone number?"))
    assert off_topic.refused and off_topic.text == "" and off_topic.claims == []
    assert ExtractiveGenerator().generate(request("When does it open?", ())).refused
    # threshold 0 answers anything with a sentence; threshold 1 needs every question word
    assert not ExtractiveGenerator(threshold=0.0).generate(request("What is the phone number?")).refused
    assert ExtractiveGenerator(threshold=1.0).generate(request("When do films and snacks get lent?")).refused


@pytest.mark.parametrize("options", [{"threshold": float("nan")}, {"threshold": 2}, {"threshold": "x"},
                                     {"answer": "word"}])
def test_extractive_rejects_bad_options(options: dict[str, object]) -> None:
    with pytest.raises(EvretError, match="extractive generator"):
        ExtractiveGenerator(**options)  # type: ignore[arg-type]


def test_answer_span() -> None:
    sentence = "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy."
    assert answer_span(sentence, "When were the Normans in Normandy?").startswith("10th and 11th centuries")
    assert answer_span("Clara Vos founded it in 1887.", "Who founded it in 1887?") == "Clara Vos"
    assert answer_span("Bees make wax", "Bees make wax?") == "Bees make wax"  # nothing new: the whole sentence


def test_callable_and_object_generators() -> None:
    seen = []

    def pipeline(question: str, contexts: list[Context]) -> dict[str, object]:
        seen.append((question, [c.doc_id for c in contexts]))
        return {"answer": "5 pm", "claims": ["It closes at 5 pm."]}

    answer = resolve_generator(pipeline).generate(request("When?"))
    assert isinstance(answer, Answer) and answer.text == "5 pm" and answer.claims[0].text == "It closes at 5 pm."
    assert seen == [("When?", ["d1", "d2"])]
    assert CallableGenerator(lambda req: req.condition).generate(request("x", condition="retrieved")).text == "retrieved"

    class Pipeline:
        def generate(self, question: str, contexts: list[Context]) -> Answer:
            return Answer(text=question.upper(), refused=not contexts)

    generator = resolve_generator(Pipeline())
    assert isinstance(generator, ObjectGenerator)
    assert generator.batch_generate([request("hi"), request("no", ())]) == [
        Answer(text="HI"), Answer(text="NO", refused=True)]
    with pytest.raises(EvretError, match="returned a int"):
        resolve_generator(lambda q, c: 3).generate(request("x"))
    with pytest.raises(EvretError, match="claims.0.citations"):
        resolve_generator(lambda q, c: {"text": "x", "claims": [{"text": "x", "citations": "d1"}]}).generate(request("x"))
    with pytest.raises(EvretError, match="cannot use int as a generator"):
        resolve_generator(3)


def test_precomputed_answers_from_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"question_id": "q1", "answer": "5 pm", "claims": [{"text": "It closes at 5 pm.", "citations": ["d1"]}]},
        {"question_id": "q1", "condition": "retrieved", "text": "", "refused": True},
    ]) + "\n", encoding="utf-8")
    generator = resolve_generator(str(path))
    assert isinstance(generator, PrecomputedGenerator)
    gold, got, missing = generator.batch_generate([
        request("x"), request("x", condition="retrieved"), GenerationRequest("q9", "x", (), "gold")])
    assert gold is not None and gold.text == "5 pm" and gold.claims[0].citations == ["d1"]
    assert got is not None and got.refused
    assert missing is None  # unmeasured, not an error


@pytest.mark.parametrize(("lines", "message"), [
    (['{"answer": "x"}'], "answers.jsonl:1: field 'question_id' is missing"),
    (['{"question_id": "q", "answer": "x"}', '{"question_id": "q", "text": "y"}'],
     "answers.jsonl:2: a second answer for question 'q' \\(first at .*answers.jsonl:1\\)"),
    (['{"question_id": "q", "answer": "x", "text": "y"}'], "answers.jsonl:1: give the answer as 'text' or 'answer'"),
    (['{"question_id": "q", "refused": "maybe"}'], "answers.jsonl:1: refused"),
    (['{"question_id": "q", "condition": 3}'], "answers.jsonl:1: field 'condition' must be a string"),
    ([""], "has no answers"),
])
def test_precomputed_answer_errors(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=message):
        PrecomputedGenerator.from_jsonl(path)
