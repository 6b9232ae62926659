"""Create judges, metrics, retrievers, evaluators (output and retrieval), LLM providers, generators, perturbations,
claim judges, RAG scores, executors, rerankers and rewriters by their registered names: :func:`create` for any kind of :data:`evret_core.contracts.kinds.KINDS`, typed by
the kind, and one ``create_*`` per kind.

Every object built here is made by the one component builder (:func:`evret_core.plugins.builder.build`) and
remembers how it was built (:func:`~evret_core.plugins.recipes.recipe`, a
:class:`~evret_core.plugins.recipes.Recipe`), so an executor can rebuild it in another process (a Ray worker builds
a judge from its name and options instead of receiving a pickled model)."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from evret_core.contracts import kinds
from evret_core.contracts.claims import ClaimJudge
from evret_core.contracts.conversation import Rewriter
from evret_core.contracts.data import RetrievalEvaluator
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor
from evret_core.contracts.generation import Generator
from evret_core.contracts.judge import Judge
from evret_core.contracts.kinds import Kind
from evret_core.contracts.metric import Metric
from evret_core.contracts.output import RecordsEvaluator
from evret_core.contracts.perturb import Perturbation
from evret_core.contracts.provider import LLMProvider
from evret_core.contracts.rag_score import RagScore
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import Retriever
from evret_core.limits import MAX_DEPTH
from evret_core.plugins import builder
from evret_core.plugins.loading import get_registry
from evret_core.plugins.recipes import Recipe as Recipe
from evret_core.plugins.recipes import recipe as recipe

T = TypeVar("T")

_METRIC_NAME = re.compile(r"^(?P<family>[A-Za-z_][\w\-]*?)(?:@(?P<k>[^@()]+))?(?:\((?P<options>[^()]*)\))?$")


def create(kind: Kind[T], name: str, **options: Any) -> T:
    """The object of kind ``kind`` (a row of :data:`evret_core.contracts.kinds.KINDS`) registered as ``name``, built with
    ``options`` by the component builder (:func:`~evret_core.plugins.builder.build`); typed as the kind's base
    (``create(JUDGE, "exact")`` is a ``Judge``). Not checked at run time."""
    return builder.build(kind, name, options)


def names(kind: Kind[Any]) -> list[str]:
    """The names registered for ``kind``, sorted."""
    return get_registry().names(kind.name)


def create_judge(name: str, **options: Any) -> Judge:
    """A judge registered as ``name`` (``exact``, ``regex``, ``token-overlap``, ``semantic``, ``llm``...)."""
    return create(kinds.JUDGE, name, **options)


def create_retriever(name: str, **options: Any) -> Retriever:
    """A retriever registered as ``name`` (``bm25``, ``dense``, ``qdrant``...)."""
    return create(kinds.RETRIEVER, name, **options)


def create_evaluator(name: str, **options: Any) -> RecordsEvaluator:
    """An output evaluator registered as ``name`` (``exact``, ``regex``, ``llm-score``, ``direct``...): it scores
    records with ``evaluate(records)``. The retrieval evaluator is :func:`create_retrieval_evaluator`'s."""
    return create(kinds.EVALUATOR, name, **options)


def create_retrieval_evaluator(name: str, **options: Any) -> RetrievalEvaluator:
    """A retrieval evaluator registered as ``name`` (the built-in ``retrieval``): it scores a retriever on a
    dataset with ``evaluate(dataset)``."""
    return create(kinds.RETRIEVAL_EVALUATOR, name, **options)


def create_llm_provider(name: str, **options: Any) -> LLMProvider:
    """An LLM provider registered as ``name`` (``openai``, ``anthropic``, ``google``)."""
    return create(kinds.LLM_PROVIDER, name, **options)


def create_generator(name: str, **options: Any) -> Generator:
    """A RAG generator registered as ``name`` (``extractive``...)."""
    return create(kinds.GENERATOR, name, **options)


def create_perturbation(name: str, **options: Any) -> Perturbation:
    """An adversarial perturbation family registered as ``name`` (``counterfactual``, ``injection``...)."""
    return create(kinds.PERTURBATION, name, **options)


def create_claim_judge(name: str, **options: Any) -> ClaimJudge:
    """A RAG claim judge registered as ``name`` (``lexical``, ``llm``)."""
    return create(kinds.CLAIM_JUDGE, name, **options)


def create_rag_score(name: str, **options: Any) -> RagScore:
    """A RAG score registered as ``name`` (``claims``, ``answer-match``, ``behaviour``...)."""
    return create(kinds.RAG_SCORE, name, **options)


def create_executor(name: str, **options: Any) -> Executor:
    """An executor registered as ``name`` (``local``, ``ray`` with evret-ray)."""
    return create(kinds.EXECUTOR, name, **options)


def create_reranker(name: str, **options: Any) -> Reranker:
    """A reranker registered as ``name`` (``llm``; ``cross-encoder``, ``embedding`` with evret-sentence-transformers)."""
    return create(kinds.RERANKER, name, **options)


def create_rewriter(name: str, **options: Any) -> Rewriter:
    """A rewriter registered as ``name`` (``llm``, ``carry-terms``)."""
    return create(kinds.REWRITER, name, **options)


def parse_metric_spec(spec: str) -> tuple[str, int | None, dict[str, Any]]:
    """Split a metric name into family, cutoff and options: ``"ndcg@10(gain=exponential)"`` gives
    ``("ndcg", 10, {"gain": "exponential"})``, ``"rbp(p=0.5)"`` gives ``("rbp", None, {"p": 0.5})``. Option values
    are read as JSON when they parse (numbers, true/false), else kept as strings."""
    match = _METRIC_NAME.match(spec.strip())
    if not match:
        raise EvretError(
            f"bad metric name {spec!r}; write it as NAME, NAME@K or NAME@K(OPTION=VALUE, ...), e.g. ndcg@10"
        )
    family, k_text, options_text = match.group("family"), match.group("k"), match.group("options")
    options: dict[str, Any] = {}
    for part in (options_text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise EvretError(f"bad metric name {spec!r}: write each option as KEY=VALUE, e.g. ndcg@10(gain=exponential)")
        options[key.strip()] = _option_value(value.strip())
    if k_text is None:
        return family, None, options
    try:
        k = int(k_text)
    except ValueError:
        raise EvretError(f"bad metric name {spec!r}: the cutoff after '@' must be a positive integer") from None
    if not 0 < k <= MAX_DEPTH:
        raise EvretError(f"bad metric name {spec!r}: the cutoff after '@' must be an integer from 1 to {MAX_DEPTH}")
    return family, k, options


def _option_value(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_metric_name(spec: str) -> tuple[str, int | None]:
    """Split ``"ndcg@10"`` into ``("ndcg", 10)``; ``"mrr"`` gives ``("mrr", None)`` (options are ignored)."""
    family, k, _ = parse_metric_spec(spec)
    return family, k


def create_metric(spec: str, **options: Any) -> Metric:
    """A metric from a name such as ``"ndcg@10"``, ``"recall@100"``, ``"mrr"`` or ``"ndcg@10(gain=exponential)"``;
    keyword ``options`` win over options written in the name. ``create_metric(m.name)`` rebuilds ``m``."""
    family, k, named = parse_metric_spec(spec)
    options = {**named, **options}
    if k is not None:
        options = {"k": k, **options}
    return create(kinds.METRIC, family, **options)


def judge_names() -> list[str]:
    return names(kinds.JUDGE)


def metric_names() -> list[str]:
    return names(kinds.METRIC)


def retriever_names() -> list[str]:
    return names(kinds.RETRIEVER)


def evaluator_names() -> list[str]:
    return names(kinds.EVALUATOR)


def retrieval_evaluator_names() -> list[str]:
    return names(kinds.RETRIEVAL_EVALUATOR)


def llm_provider_names() -> list[str]:
    return names(kinds.LLM_PROVIDER)


def generator_names() -> list[str]:
    return names(kinds.GENERATOR)


def perturbation_names() -> list[str]:
    return names(kinds.PERTURBATION)


def claim_judge_names() -> list[str]:
    return names(kinds.CLAIM_JUDGE)


def rag_score_names() -> list[str]:
    return names(kinds.RAG_SCORE)


def executor_names() -> list[str]:
    return names(kinds.EXECUTOR)


def reranker_names() -> list[str]:
    return names(kinds.RERANKER)


def rewriter_names() -> list[str]:
    return names(kinds.REWRITER)
