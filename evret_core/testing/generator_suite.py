"""The generator contract, as tests: a generator plugin's test class subclasses :class:`GeneratorConformance`.

What the RAG harness relies on: ``batch_generate(requests)`` gives one :class:`~evret_core.rag.Answer` (or None,
unmeasured) per request, in order, the same as asking one request at a time and the same when asked again; an
answer is consistent (a refusal makes no claims, no claim is blank) and cites only the contexts it was given; the
harness can run the generator end to end.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.generation import Answer, Context, GenerationRequest
from evret_core.rag.generate.generators import check_answer
from evret_core.testing.suite import Conformance

MUSEUM = Context("museum", "The museum opens at 9 am. Entry is free on Sundays.")
CAFE = Context("cafe", "The cafe is closed on Mondays.")
PARKING = Context("parking", "Parking costs 3 euros per hour.")


def request(question_id: str, question: str, *contexts: Context, condition: str = "gold") -> GenerationRequest:
    """A :class:`~evret_core.rag.GenerationRequest` of ``question`` over ``contexts``."""
    return GenerationRequest(question_id, question, tuple(contexts), condition)


class GeneratorConformance(Conformance):
    """Tests every generator must pass. Override the ``generator`` fixture; override ``answerable`` (requests
    whose contexts hold the answer) and ``unanswerable`` (requests whose contexts do not) when your generator needs
    other examples. Set ``refuses = False`` for a generator that never refuses."""

    kind = kinds.GENERATOR

    @pytest.fixture
    def subject(self, generator: Any) -> Any:
        return generator

    refuses: bool = True

    @pytest.fixture
    def generator(self) -> Any:
        raise NotImplementedError("override the `generator` fixture to return the generator under test")

    @pytest.fixture
    def answerable(self) -> list[GenerationRequest]:
        return [
            request("q1", "When does the museum open?", CAFE, MUSEUM),
            request("q2", "How much does parking cost per hour?", PARKING, MUSEUM),
            request("q3", "When is the cafe closed?", CAFE, PARKING, condition="retrieved"),
        ]

    @pytest.fixture
    def unanswerable(self) -> list[GenerationRequest]:
        return [request("q4", "Who painted the ceiling fresco?", PARKING, CAFE)]

    @staticmethod
    def dumped(answers: list[Any]) -> list[Any]:
        return [None if a is None else asdict(a) for a in answers]

    def test_has_a_name_and_a_json_config(self, generator: Any) -> None:
        assert isinstance(generator.name, str) and generator.name
        config = generator.config()
        assert config["name"] == generator.name
        json.dumps(config)

    def test_one_answer_or_none_per_request(self, generator: Any, answerable: list[GenerationRequest],
                                            unanswerable: list[GenerationRequest]) -> None:
        requests = [*answerable, *unanswerable]
        answers = list(generator.batch_generate(requests))
        assert len(answers) == len(requests)
        assert all(a is None or isinstance(a, Answer) for a in answers)

    def test_answers_the_answerable(self, generator: Any, answerable: list[GenerationRequest]) -> None:
        for req, answer in zip(answerable, generator.batch_generate(answerable), strict=True):
            assert answer is not None and not answer.refused, f"{req.question!r} was not answered"
            assert answer.text.strip(), f"{req.question!r}: empty answer text"

    def test_refuses_the_unanswerable(self, generator: Any, unanswerable: list[GenerationRequest]) -> None:
        if not self.refuses:
            pytest.skip("this generator never refuses")
        for req, answer in zip(unanswerable, generator.batch_generate(unanswerable), strict=True):
            assert answer is not None and answer.refused, f"{req.question!r}: answered without an answering context"

    def test_answers_are_consistent_and_cite_only_given_contexts(
        self, generator: Any, answerable: list[GenerationRequest], unanswerable: list[GenerationRequest]
    ) -> None:
        requests = [*answerable, *unanswerable]
        for req, answer in zip(requests, generator.batch_generate(requests), strict=True):
            if answer is None:
                continue
            check_answer(answer, f"question {req.question_id}")  # raises on a refusal with claims, a blank claim
            given = {c.doc_id for c in req.contexts}
            cited = {i for claim in answer.claims for i in claim.citations}
            assert cited <= given, f"{req.question_id}: cites {sorted(cited - given)}, not among its contexts"

    def test_batch_agrees_with_one_by_one_and_keeps_order(
        self, generator: Any, answerable: list[GenerationRequest], unanswerable: list[GenerationRequest]
    ) -> None:
        requests = [*answerable, *unanswerable]
        batch = self.dumped(list(generator.batch_generate(requests)))
        assert [self.dumped(list(generator.batch_generate([r])))[0] for r in requests] == batch
        assert self.dumped(list(generator.batch_generate(requests[::-1]))) == batch[::-1]

    def test_same_answers_when_asked_again(self, generator: Any, answerable: list[GenerationRequest]) -> None:
        first = self.dumped(list(generator.batch_generate(answerable)))
        assert self.dumped(list(generator.batch_generate(answerable))) == first

    def test_batch_of_nothing_is_empty(self, generator: Any) -> None:
        assert list(generator.batch_generate([])) == []

    def test_usable_by_the_rag_evaluator(self, generator: Any, answerable: list[GenerationRequest]) -> None:
        from evret_core.rag import QuestionSet, RagEvaluator, RagQuestion

        corpus = {c.doc_id: {"text": c.text} for r in answerable for c in r.contexts}
        questions = QuestionSet(name="conformance", corpus=corpus, questions=[
            RagQuestion(question_id=r.question_id, question=r.question, answers=[["unused"]],
                        gold_doc_ids=[c.doc_id for c in r.contexts])
            for r in answerable])
        results = RagEvaluator(generator=generator, conditions=["gold"], n_resamples=20).evaluate(questions)
        outcomes = [o.conditions["gold"] for o in results.per_question.values()]
        assert len(outcomes) == len(answerable)
        assert all(o.answer is not None and not o.answer.refused for o in outcomes)
