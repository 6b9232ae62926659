"""Context conditions: which documents a generator sees for a question.

- ``gold``: the question's gold documents only (an upper bound that isolates the generator); none for a question
  to refuse that has no gold ids, and no case at all (skipped) for a question to answer that has none;
- ``retrieved``: the retriever's top ``k`` (the real system);
- a :class:`PerturbedCondition`: a base condition's contexts passed through a *perturbation*, a function that may
  replace, add or drop contexts and may change what the right behaviour is (a question whose gold document was
  removed should be refused). The adversarial cases (counterfactual, injection, missing-gold, irrelevant-only)
  plug in here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.generation import Context
from evret_core.contracts.perturb import ConditionCase, Perturbation
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion

BUILTIN_CONDITIONS = ("gold", "retrieved")


def gold_contexts(question: RagQuestion, questions: QuestionSet) -> list[Context]:
    """The question's gold documents, in the order given."""
    out = []
    for doc_id in question.gold_doc_ids:
        text = questions.text_of(doc_id)
        if text is not None:
            out.append(Context(doc_id, text))
    return out


def retrieved_contexts(results: Sequence[RetrievalResult], questions: QuestionSet, k: int) -> list[Context]:
    """The top ``k`` retrieved documents; a result without text takes the corpus text of its id."""
    out = []
    for result in results[:k]:
        text = result.text if result.text is not None else questions.text_of(result.doc_id)
        if text is None:
            raise EvretError(f"retrieved document {result.doc_id!r} has no text and is not in the corpus")
        out.append(Context(result.doc_id, text))
    return out


class Condition:
    """A named way to choose contexts. Subclasses implement :meth:`case`."""

    name: str = "condition"
    needs_retrieval: bool = False

    def case(self, question: RagQuestion, questions: QuestionSet, retrieved: Sequence[RetrievalResult] | None,
             k: int, seed: int) -> ConditionCase:
        raise NotImplementedError

    def check_inputs(self, questions: QuestionSet, conditions: Sequence[str]) -> None:
        """Raise an :class:`EvretError` when this condition cannot be built right for ``questions`` (the run's
        condition names in ``conditions``). The harness calls it before any work; the default accepts anything."""

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class GoldCondition(Condition):
    name = "gold"

    def case(self, question: RagQuestion, questions: QuestionSet, retrieved: Sequence[RetrievalResult] | None,
             k: int, seed: int) -> ConditionCase:
        if not question.gold_doc_ids and question.expected_behaviour == "answer":
            # an empty context would only test refusing; a question without gold ids has no gold condition
            return ConditionCase([], skip="no gold_doc_ids")
        return ConditionCase(gold_contexts(question, questions))

    def check_inputs(self, questions: QuestionSet, conditions: Sequence[str]) -> None:
        """Gold ids need the corpus they point into: without one every gold context would be empty."""
        if questions.corpus:
            return  # the question set checked that every gold id is in it
        q = next((q for q in questions.questions if q.gold_doc_ids), None)
        if q is not None:
            raise EvretError(f"the gold condition needs the texts of the gold ids, but the question set has no "
                             f"corpus (e.g. question {q.question_id!r}: gold id {q.gold_doc_ids[0]!r}); give the "
                             f"corpus they point into with --corpus CORPUS.jsonl (QuestionSet.load(..., corpus=...))")


class RetrievedCondition(Condition):
    name = "retrieved"
    needs_retrieval = True

    def case(self, question: RagQuestion, questions: QuestionSet, retrieved: Sequence[RetrievalResult] | None,
             k: int, seed: int) -> ConditionCase:
        return ConditionCase(retrieved_contexts(retrieved or [], questions, k))


class PerturbedCondition(Condition):
    """``base``'s contexts (``gold`` or ``retrieved``) passed through ``perturb``; seeded per question, so a run
    reproduces its cases."""

    def __init__(self, name: str, perturb: Perturbation | Callable[..., ConditionCase], base: str = "retrieved"
                 ) -> None:
        if not name or name in BUILTIN_CONDITIONS:
            raise EvretError(f"a perturbed condition needs its own name (not {name!r})")
        if base not in BUILTIN_CONDITIONS:
            raise EvretError(f"perturbed condition {name!r}: base must be one of {', '.join(BUILTIN_CONDITIONS)}")
        self.name = name
        self.perturb = perturb
        self.base: Condition = GoldCondition() if base == "gold" else RetrievedCondition()
        self.needs_retrieval = self.base.needs_retrieval

    def case(self, question: RagQuestion, questions: QuestionSet, retrieved: Sequence[RetrievalResult] | None,
             k: int, seed: int) -> ConditionCase:
        base = self.base.case(question, questions, retrieved, k, seed)
        # one stream per (seed, question): adding a question never changes another question's case
        rng = np.random.default_rng([seed, int.from_bytes(question.question_id.encode("utf-8")[:8], "little")])
        case = self.perturb(question, base.contexts, questions, rng)
        if not isinstance(case, ConditionCase):
            raise EvretError(f"perturbation of condition {self.name!r} returned {type(case).__name__}, "
                             f"expected a ConditionCase")
        bad = next((c for c in case.contexts if not isinstance(c, Context)), None)
        if bad is not None:
            raise EvretError(f"perturbation of condition {self.name!r}, question {question.question_id!r}: a context "
                             f"is a {type(bad).__name__}, expected Context(doc_id, text)")
        return case

    def check_inputs(self, questions: QuestionSet, conditions: Sequence[str]) -> None:
        self.base.check_inputs(questions, conditions)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "base": self.base.name,
                "perturb": getattr(self.perturb, "__name__", type(self.perturb).__name__)}


def resolve_conditions(conditions: Sequence[str | Condition]) -> list[Condition]:
    """Condition objects from names (``gold``, ``retrieved``) or objects; names must be unique."""
    out: list[Condition] = []
    for c in conditions:
        if isinstance(c, Condition):
            out.append(c)
        elif c == "gold":
            out.append(GoldCondition())
        elif c == "retrieved":
            out.append(RetrievedCondition())
        else:
            raise EvretError(f"unknown condition {c!r}{did_you_mean(c, BUILTIN_CONDITIONS)}; use "
                             f"{', '.join(BUILTIN_CONDITIONS)} (perturbed conditions "
                             f"are built with PerturbedCondition)")
    names = [c.name for c in out]
    if not out:
        raise EvretError("no conditions given: use gold, retrieved or both")
    if len(set(names)) != len(names):
        raise EvretError(f"condition given twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    return out
