"""Hook register_perturbations: a plugin's adversarial family used by name beside the built-ins."""

from __future__ import annotations

import pytest

from evret_core import EvretError, hookimpl
from evret_core.contracts.generation import Context
from evret_core.contracts.perturb import ConditionCase
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import perturbation_names
from evret_core.rag import QuestionSet, RagEvaluator
from evret_core.rag.perturb.cases import adversarial_conditions


def shout(**options):  # type: ignore[no-untyped-def]
    """A family that upper-cases every context."""

    def perturb(question, contexts, questions, rng):  # type: ignore[no-untyped-def]
        return ConditionCase([Context(c.doc_id, c.text.upper()) for c in contexts], info={"family": "shout"})

    return perturb


class Plugin:
    @hookimpl
    def register_perturbations(self, register):  # type: ignore[no-untyped-def]
        register("shout", shout)


def test_register_perturbations() -> None:
    register_plugin(Plugin(), name="p")
    assert {"counterfactual", "injection", "missing-gold", "irrelevant-only", "shout"} <= set(perturbation_names())
    questions = QuestionSet.from_records(
        [{"id": "q1", "question": "What do bees make?", "answers": ["wax"], "gold_doc_ids": ["d1"]}],
        corpus={"d1": {"text": "Bees make wax."}},
    )
    conditions = ["gold", *adversarial_conditions(["shout"], base="gold")]
    results = RagEvaluator(generator="extractive", conditions=conditions, n_resamples=10).evaluate(questions)
    assert results.per_question["q1"].conditions["shout"].info == {"family": "shout"}


def test_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(EvretError, match="counterfactual"):
        adversarial_conditions(["no-such-family"])
