"""The one table of plugin kinds: every kind of thing a plugin registers, and what it must be.

Each :class:`Kind` names its registry key, its ``register_*`` hook, the base class or protocol of what its
factories return and its label in ``evret plugins``. The registry (:mod:`evret_core.plugins.loading`), the typed
``create_*`` functions (:mod:`evret_core.plugins.registry`), the hook names
(:data:`evret_core.contracts.hooks.HOOK_NAMES`), ``evret plugins``, the conformance suites
(:data:`evret_core.testing.SUITES`) and the list in docs/hooks.md all derive from :data:`KINDS`;
``tests/contracts/test_kinds.py`` checks it. Adding a kind is adding a row here, a hookspec of the same name, its docs/hooks.md
section and its ``create_*`` alias.

``Kind`` is generic in the type its factories build: ``create(JUDGE, "exact")`` is a
:class:`~evret_core.contracts.judge.Judge` to a type checker. Nothing is checked at run time (a registered factory may
return any object that honours the contract). The bases are imported here: they are contracts, and contracts import
nothing heavy.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from evret_core.contracts.claims import ClaimJudge
from evret_core.contracts.conversation import Rewriter
from evret_core.contracts.data import RetrievalEvaluator
from evret_core.contracts.executor import Executor
from evret_core.contracts.generation import Generator
from evret_core.contracts.judge import Judge
from evret_core.contracts.metric import Metric
from evret_core.contracts.output import RecordsEvaluator
from evret_core.contracts.perturb import Perturbation
from evret_core.contracts.provider import LLMProvider
from evret_core.contracts.rag_score import RagScore
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import Retriever
from evret_core.contracts.values import Value, value_type

T = TypeVar("T")


@value_type
class Kind(Value, Generic[T]):
    """One kind of plugin-registered thing; ``T`` is the type its factories build."""

    name: str
    """The registry key: ``registry.get(name, ...)``, ``PluginInfo.registers`` and the JSON of ``evret plugins``."""
    hook: str
    """The hookspec a plugin implements to register things of this kind."""
    base: type[T]
    """The base class or protocol of what the factories return."""
    label: str
    """The plural shown by ``evret plugins`` (``judges``, ``output evaluators``)."""

    @property
    def singular(self) -> str:
        """How messages name one: ``llm provider``."""
        return self.name.replace("_", " ")


JUDGE: Kind[Judge] = Kind("judge", "register_judges", Judge, "judges")
METRIC: Kind[Metric] = Kind("metric", "register_metrics", Metric, "metrics")
RETRIEVER: Kind[Retriever] = Kind("retriever", "register_retrievers", Retriever, "retrievers")
# One kind, one contract: "evaluator" scores records (evaluate(records)), "retrieval_evaluator" scores a
# retriever on a dataset (evaluate(dataset)). "evaluator" is shown as "output evaluators", as the docs name it.
EVALUATOR: Kind[RecordsEvaluator] = Kind("evaluator", "register_evaluators", RecordsEvaluator, "output evaluators")
RETRIEVAL_EVALUATOR: Kind[RetrievalEvaluator] = Kind("retrieval_evaluator", "register_retrieval_evaluators",
                                                     RetrievalEvaluator, "retrieval evaluators")
LLM_PROVIDER: Kind[LLMProvider] = Kind("llm_provider", "register_llm_providers", LLMProvider, "llm providers")
GENERATOR: Kind[Generator] = Kind("generator", "register_generators", Generator, "generators")
PERTURBATION: Kind[Perturbation] = Kind("perturbation", "register_perturbations", Perturbation, "perturbations")
CLAIM_JUDGE: Kind[ClaimJudge] = Kind("claim_judge", "register_claim_judges", ClaimJudge, "claim judges")
RAG_SCORE: Kind[RagScore] = Kind("rag_score", "register_rag_scores", RagScore, "rag scores")
EXECUTOR: Kind[Executor] = Kind("executor", "register_executors", Executor, "executors")
RERANKER: Kind[Reranker] = Kind("reranker", "register_rerankers", Reranker, "rerankers")
REWRITER: Kind[Rewriter] = Kind("rewriter", "register_rewriters", Rewriter, "rewriters")

KINDS: tuple[Kind[Any], ...] = (JUDGE, METRIC, RETRIEVER, EVALUATOR, RETRIEVAL_EVALUATOR, LLM_PROVIDER, GENERATOR,
                                PERTURBATION, CLAIM_JUDGE, RAG_SCORE, EXECUTOR, RERANKER, REWRITER)
"""Every kind, in the order the docs list their hooks."""

BY_NAME: dict[str, Kind[Any]] = {kind.name: kind for kind in KINDS}

OTHER_HOOKS = ("adapt_retriever",)
"""Hooks that register nothing (they answer a question): not kinds, but hooks all the same."""


def kind_named(name: str) -> Kind[Any]:
    """The kind whose registry key is ``name`` (``"llm_provider"``)."""
    return BY_NAME[name]
