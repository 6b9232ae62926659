"""The conformance suites fail on implementations that break the contract they state: each broken object below is
run through one test of its kind's suite, which must raise."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evret_core.contracts.executor import JudgeRun
from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest
from evret_core.contracts.perturb import ConditionCase
from evret_core.evaluation.executors import LocalExecutor
from evret_core.plugins.registry import create_evaluator, create_generator
from evret_core.testing import (
    ExecutorConformance,
    GeneratorConformance,
    OutputEvaluatorConformance,
    PerturbationConformance,
)
from evret_core.testing.generator_suite import CAFE, MUSEUM, PARKING, request
from evret_core.testing.perturbation_suite import CORPUS, QUESTIONS

REQUESTS = [request("q1", "When does the museum open?", CAFE, MUSEUM),
            request("q2", "How much does parking cost per hour?", PARKING, MUSEUM)]


class ShuffledJudging(LocalExecutor):
    """Judges every context, but gives the verdicts back in the wrong order."""

    name = "shuffled"

    def judge(self, judge: Any, contexts: Any, batch_size: int, progress: Any) -> JudgeRun:
        run = super().judge(judge, contexts, batch_size, progress)
        return JudgeRun(run.verdicts[1:] + run.verdicts[:1], run.stats)


def test_executor_suite_catches_verdicts_out_of_order() -> None:
    with pytest.raises(AssertionError):
        ExecutorConformance().test_judge_gives_the_local_verdicts_in_order(ShuffledJudging())


class CitesEverything:
    """Answers from the contexts, citing an id it was not shown."""

    name = "cites-everything"

    def batch_generate(self, requests: Sequence[GenerationRequest]) -> list[Answer | None]:
        return [Answer(text=r.contexts[-1].text, claims=[Claim(text=r.contexts[-1].text, citations=["elsewhere"])])
                for r in requests]

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class AnswersByPosition:
    """Answers a batch's first request differently from the others (a batch that is not one-by-one)."""

    name = "by-position"

    def __init__(self) -> None:
        self.inner = create_generator("extractive")

    def batch_generate(self, requests: Sequence[GenerationRequest]) -> list[Answer | None]:
        answers = self.inner.batch_generate(requests)
        return [None if i == 0 else a for i, a in enumerate(answers)]


def test_generator_suite_catches_unknown_citations_and_position_dependent_batches() -> None:
    suite = GeneratorConformance()
    with pytest.raises(AssertionError, match="elsewhere"):
        suite.test_answers_are_consistent_and_cite_only_given_contexts(CitesEverything(), REQUESTS, [])
    with pytest.raises(AssertionError):
        suite.test_batch_agrees_with_one_by_one_and_keeps_order(AnswersByPosition(), REQUESTS, [])


class MeanOfBatch:
    """The ``exact`` evaluator, but every record gets the batch's mean: a record's score depends on the others."""

    name = "mean-of-batch"

    def evaluate(self, records: list[dict[str, Any]]) -> Any:
        results = create_evaluator("exact").evaluate(records)
        return dataclasses.replace(results, scores=[results.mean for _ in records])

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class DriftsInBatches:
    """The ``exact`` evaluator, but a record scored among others comes out ``drift`` under its score alone, as a
    float32 model's batched encode does (1.0 alone, 0.99999997 in a batch)."""

    name = "drifts-in-batches"

    def __init__(self, drift: float) -> None:
        self.drift = drift

    def evaluate(self, records: list[dict[str, Any]]) -> Any:
        results = create_evaluator("exact").evaluate(records)
        if len(records) > 1:
            results = dataclasses.replace(
                results, scores=[None if s is None else s * (1.0 - self.drift) for s in results.scores])
        return results

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


def test_output_evaluator_suite_catches_batch_dependent_scores() -> None:
    records = [{"output": "Paris", "target": "Paris"}, {"output": "Six", "target": "Eight"}]
    suite = OutputEvaluatorConformance()
    with pytest.raises(AssertionError):
        suite.test_together_one_at_a_time_and_reversed_agree(MeanOfBatch(), records)
    with pytest.raises(AssertionError):  # a real difference, not rounding
        suite.test_together_one_at_a_time_and_reversed_agree(DriftsInBatches(1e-3), records)
    # float rounding of a batched encode is within the suite's stated tolerance
    suite.test_together_one_at_a_time_and_reversed_agree(DriftsInBatches(3e-8), records)


class DropsFirstContextInPlace:
    """Removes the first base context from the caller's list (mutates its input)."""

    name = "drops-in-place"

    def __call__(self, question: Any, contexts: list[Context], questions: Any, rng: np.random.Generator) -> Any:
        if contexts:
            contexts.pop(0)
        return ConditionCase(list(contexts), info={"family": "missing-gold"})


class MutatingFamily(PerturbationConformance):
    family = "missing-gold"

    def make(self) -> Any:
        return DropsFirstContextInPlace()


def test_perturbation_suite_catches_a_family_that_changes_its_input() -> None:
    from evret_core.rag.questions.question_sets import QuestionSet

    with pytest.raises(AssertionError, match="base contexts were changed"):
        MutatingFamily().test_inputs_are_left_as_they_were(QuestionSet(corpus=CORPUS, questions=QUESTIONS))
