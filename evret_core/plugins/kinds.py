"""The one table of plugin kinds: every kind of thing a plugin registers, and what it must be.

Each :class:`Kind` names its registry key, its ``register_*`` hook, the base class or protocol of what its
factories return, its label in ``evret plugins`` and its conformance suite in :mod:`evret_core.testing`. The
registry (:mod:`evret_core.plugins.loading`), the typed ``create_*`` functions (:mod:`evret_core.plugins.registry`), the hook
names (:data:`evret_core.plugins.hookspecs.HOOK_NAMES`), ``evret plugins`` and the list in docs/hooks.md all derive from
:data:`KINDS`; ``tests/test_kinds.py`` checks it. Adding a kind is adding a row here, a hookspec of the same name,
its docs/hooks.md section and its ``create_*`` alias.

``Kind`` is generic in the type its factories build: ``create(JUDGE, "exact")`` is a
:class:`~evret_core.contracts.judge.Judge` to a type checker. Nothing is checked at run time (a registered factory may
return any object that honours the contract, as before), and this module imports nothing heavy: the base types
are named by dotted path and imported by :meth:`Kind.base` only when asked for.

``conformance`` is the dotted name of the kind's suite (``"evret_core.testing:JudgeConformance"``), or None for a
kind that has none yet.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from evret_core.contracts.provider import LLMProvider

if TYPE_CHECKING:
    from evret_core.contracts.claims import ClaimJudge
    from evret_core.contracts.executor import Executor
    from evret_core.contracts.generation import Generator
    from evret_core.contracts.judge import Judge
    from evret_core.contracts.metric import Metric
    from evret_core.contracts.output import RecordsEvaluator
    from evret_core.contracts.perturb import Perturbation
    from evret_core.contracts.rag_score import RagScore
    from evret_core.contracts.retrieve import Retriever
    from evret_core.evaluation.evaluator import Evaluator

T = TypeVar("T")


@dataclass(frozen=True)
class Kind(Generic[T]):
    """One kind of plugin-registered thing; ``T`` is the type its factories build."""

    name: str
    """The registry key: ``registry.get(name, ...)``, ``PluginInfo.registers`` and the JSON of ``evret plugins``."""
    hook: str
    """The hookspec a plugin implements to register things of this kind."""
    base_path: str
    """``"module:Name"`` of the base class or protocol of what the factories return."""
    label: str
    """The plural shown by ``evret plugins`` (``judges``, ``output evaluators``)."""
    conformance: str | None = None
    """``"module:Name"`` of the conformance suite plugin tests subclass, or None when the kind has none yet."""

    def base(self) -> type[T]:
        """The base class or protocol (imported now: it may import numpy or pydantic)."""
        module, _, attr = self.base_path.partition(":")
        base: type[T] = getattr(importlib.import_module(module), attr)
        return base

    def conformance_suite(self) -> type[Any] | None:
        """The conformance suite class (imports pytest), or None."""
        if self.conformance is None:
            return None
        module, _, attr = self.conformance.partition(":")
        suite: type[Any] = getattr(importlib.import_module(module), attr)
        return suite

    @property
    def singular(self) -> str:
        """How messages name one: ``llm provider``."""
        return self.name.replace("_", " ")


JUDGE: Kind[Judge] = Kind("judge", "register_judges", "evret_core.contracts.judge:Judge", "judges",
                          "evret_core.testing:JudgeConformance")
METRIC: Kind[Metric] = Kind("metric", "register_metrics", "evret_core.contracts.metric:Metric", "metrics",
                            "evret_core.testing:MetricConformance")
RETRIEVER: Kind[Retriever] = Kind("retriever", "register_retrievers", "evret_core.contracts.retrieve:Retriever",
                                  "retrievers", "evret_core.testing:RetrieverConformance")
# One kind, one contract: "evaluator" scores records (evaluate(records)), "retrieval_evaluator" scores a
# retriever on a dataset (evaluate(dataset)). "evaluator" is shown as "output evaluators", as the docs name it.
EVALUATOR: Kind[RecordsEvaluator] = Kind("evaluator", "register_evaluators", "evret_core.contracts.output:RecordsEvaluator",
                                         "output evaluators", "evret_core.testing:OutputEvaluatorConformance")
RETRIEVAL_EVALUATOR: Kind[Evaluator] = Kind("retrieval_evaluator", "register_retrieval_evaluators",
                                            "evret_core.evaluation.evaluator:Evaluator", "retrieval evaluators",
                                            "evret_core.testing:RetrievalEvaluatorConformance")
LLM_PROVIDER: Kind[LLMProvider] = Kind("llm_provider", "register_llm_providers", "evret_core.contracts.provider:LLMProvider",
                                       "llm providers", "evret_core.testing:ProviderConformance")
GENERATOR: Kind[Generator] = Kind("generator", "register_generators", "evret_core.contracts.generation:Generator",
                                  "generators", "evret_core.testing:GeneratorConformance")
PERTURBATION: Kind[Perturbation] = Kind("perturbation", "register_perturbations",
                                        "evret_core.contracts.perturb:Perturbation", "perturbations",
                                        "evret_core.testing:PerturbationConformance")
CLAIM_JUDGE: Kind[ClaimJudge] = Kind("claim_judge", "register_claim_judges", "evret_core.contracts.claims:ClaimJudge",
                                     "claim judges", "evret_core.testing:ClaimJudgeConformance")
RAG_SCORE: Kind[RagScore] = Kind("rag_score", "register_rag_scores", "evret_core.contracts.rag_score:RagScore", "rag scores",
                                  "evret_core.testing:RagScoreConformance")
EXECUTOR: Kind[Executor] = Kind("executor", "register_executors", "evret_core.contracts.executor:Executor", "executors",
                                  "evret_core.testing:ExecutorConformance")

KINDS: tuple[Kind[Any], ...] = (JUDGE, METRIC, RETRIEVER, EVALUATOR, RETRIEVAL_EVALUATOR, LLM_PROVIDER, GENERATOR,
                                PERTURBATION, CLAIM_JUDGE, RAG_SCORE, EXECUTOR)
"""Every kind, in the order the docs list their hooks."""

BY_NAME: dict[str, Kind[Any]] = {kind.name: kind for kind in KINDS}

OTHER_HOOKS = ("adapt_retriever",)
"""Hooks that register nothing (they answer a question): not kinds, but hooks all the same."""


def kind_named(name: str) -> Kind[Any]:
    """The kind whose registry key is ``name`` (``"llm_provider"``)."""
    return BY_NAME[name]
