"""The perturbation contract: a perturbation builds the contexts a generator sees for one question under an
adversarial condition (:class:`ConditionCase`), from the base condition's contexts (the ``perturbation`` kind,
hook ``register_perturbations``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

from evret_core.contracts.data import Question, Questions
from evret_core.contracts.generation import Context
from evret_core.contracts.values import Value, value_type

if TYPE_CHECKING:
    import numpy as np


@value_type
class ConditionCase(Value):
    """The contexts of one question under one condition.

    ``expected_behaviour`` overrides the question's own when the condition changes what is right (None: keep it).
    ``info`` records what a perturbation did (the planted answer, the canary...), kept in the results. ``skip`` (a
    reason) marks a case that cannot be built, such as the gold context of a question that has no gold ids: it is
    not generated, and is reported as unmeasured.
    """

    contexts: list[Context]
    expected_behaviour: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    skip: str | None = None


class Perturbation(Protocol):
    """Builds a perturbed case from a question and its base contexts; ``rng`` is seeded per question."""

    def __call__(self, question: Question, contexts: Sequence[Context], questions: Questions,
                 rng: np.random.Generator) -> ConditionCase: ...
