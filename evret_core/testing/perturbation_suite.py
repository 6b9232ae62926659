"""The perturbation contract, as tests: an adversarial family's test class subclasses :class:`PerturbationConformance`.

What ``evret rag --adversarial`` relies on: the family, registered under ``family``, builds one
:class:`~evret_core.contracts.perturb.ConditionCase` per question from the base contexts (a list of
:class:`~evret_core.contracts.generation.Context` with distinct ids, or a ``skip`` reason), leaves its inputs as they were,
builds the same cases again under the same seed, records ``"family": family`` and JSON-able facts in ``info`` (the
cases are written with ``--save-cases`` and replayed), and runs end to end in the harness.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from evret_core.contracts import kinds
from evret_core.contracts.generation import Context
from evret_core.contracts.perturb import ConditionCase
from evret_core.rag.questions.conditions import Condition, gold_contexts
from evret_core.rag.questions.question_sets import BEHAVIOURS, QuestionSet, RagQuestion
from evret_core.testing.suite import Conformance

CORPUS = {
    "museum": {"text": "The city museum opens at 9 am. Entry to the museum is free on Sundays."},
    "cafe": {"text": "The museum cafe is closed on Mondays. It serves soup and sandwiches."},
    "parking": {"text": "Parking near the museum costs 3 euros per hour."},
    "painter": {"text": "The ceiling of the great hall was painted by Maria Rossi in 1921."},
    "bees": {"text": "Honey bees communicate the direction of food with a waggle dance."},
    "tides": {"text": "Tides are caused mainly by the gravitational pull of the Moon."},
    "volcano": {"text": "Mount Etna is an active volcano on the east coast of Sicily."},
    "chess": {"text": "In chess, the queen can move any number of squares in a straight line."},
}
QUESTIONS = [
    RagQuestion(question_id="q1", question="When does the city museum open?", answers=[["9 am"]],
                gold_doc_ids=["museum"]),
    RagQuestion(question_id="q2", question="How much does parking near the museum cost per hour?",
                answers=[["3 euros"]], gold_doc_ids=["parking"]),
    RagQuestion(question_id="q3", question="Who painted the ceiling of the great hall?", answers=[["Maria Rossi"]],
                gold_doc_ids=["painter"]),
    RagQuestion(question_id="q4", question="Which volcano is on the east coast of Sicily?",
                answers=[["Mount Etna", "Etna"]], gold_doc_ids=["volcano", "tides"]),
]


class PerturbationConformance(Conformance):
    """Set ``family`` (the registered name); override ``questions`` when your family needs another question set,
    and ``options`` for the factory's options."""

    kind = kinds.PERTURBATION

    @pytest.fixture
    def subject(self) -> Any:
        return self.make()

    @pytest.fixture
    def registered_name(self) -> str | None:
        return self.family

    family: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def questions(self) -> QuestionSet:
        return QuestionSet(name="conformance", corpus=CORPUS, questions=QUESTIONS)

    def make(self) -> Any:
        from evret_core.plugins.registry import create_perturbation

        if not self.family:
            raise NotImplementedError("set `family` to the registered perturbation family")
        return create_perturbation(self.family, **self.options)

    def cases(self, questions: QuestionSet, seed: int = 0) -> list[ConditionCase]:
        """One case per question over its gold contexts, each with its own seeded ``rng``, as the harness does."""
        perturb = self.make()
        return [perturb(q, gold_contexts(q, questions), questions, np.random.default_rng([seed, i]))
                for i, q in enumerate(questions.questions)]

    def test_one_case_per_question_of_contexts_or_a_skip(self, questions: QuestionSet) -> None:
        cases = self.cases(questions)
        assert len(cases) == len(questions.questions)
        for q, case in zip(questions.questions, cases, strict=True):
            assert isinstance(case, ConditionCase), q.question_id
            if case.skip is not None:
                assert isinstance(case.skip, str) and case.skip
                continue
            assert all(isinstance(c, Context) and isinstance(c.text, str) for c in case.contexts), q.question_id
            ids = [c.doc_id for c in case.contexts]
            assert len(set(ids)) == len(ids), f"{q.question_id}: a context id twice: {ids}"
            assert case.expected_behaviour is None or case.expected_behaviour in BEHAVIOURS
        assert any(c.skip is None for c in cases), "the family built no case at all on the question set"

    def test_info_names_the_family_and_is_json(self, questions: QuestionSet) -> None:
        for case in self.cases(questions):
            if case.skip is None:
                assert case.info.get("family") == self.family
                json.dumps(case.info)

    def test_same_cases_under_the_same_seed(self, questions: QuestionSet) -> None:
        first = self.cases(questions, seed=3)
        again = self.cases(questions, seed=3)
        assert [(c.contexts, c.expected_behaviour, c.info, c.skip) for c in again] == \
            [(c.contexts, c.expected_behaviour, c.info, c.skip) for c in first]

    def test_inputs_are_left_as_they_were(self, questions: QuestionSet) -> None:
        before = questions.model_dump()
        perturb = self.make()
        for i, q in enumerate(questions.questions):
            contexts = gold_contexts(q, questions)
            given = list(contexts)
            perturb(q, contexts, questions, np.random.default_rng(i))
            assert contexts == given, f"{q.question_id}: the base contexts were changed"
        assert questions.model_dump() == before

    def test_cases_are_written_and_replayed(self, questions: QuestionSet, tmp_path: Path) -> None:
        from evret_core.rag.perturb.cases import (
            adversarial_conditions,
            build_cases,
            read_cases,
            write_cases,
        )

        built = build_cases(adversarial_conditions([self.family], base="gold", **self.options), questions, None, 5, 0)
        write_cases(tmp_path / "cases.jsonl", questions, built)
        (replayed,) = read_cases(tmp_path / "cases.jsonl")
        for q, case in zip(questions.questions, built[replayed.name], strict=True):
            again = replayed.case(q, questions, None, 5, 0)
            assert (again.skip is None) == (case.skip is None), q.question_id
            if case.skip is not None:
                continue
            assert (again.contexts, again.expected_behaviour, again.info) == \
                (case.contexts, case.expected_behaviour, case.info), q.question_id

    def test_runs_in_the_harness(self, questions: QuestionSet) -> None:
        from evret_core.rag import RagEvaluator
        from evret_core.rag.perturb.cases import adversarial_conditions

        conditions: list[str | Condition] = ["gold", *adversarial_conditions([self.family], base="gold",
                                                                              **self.options)]
        results = RagEvaluator(conditions=conditions, n_resamples=20).evaluate(questions)
        outcomes = [o.conditions[self.family] for o in results.per_question.values()]
        assert len(outcomes) == len(questions.questions)
        assert any(o.skipped is None and o.answer is not None for o in outcomes)
