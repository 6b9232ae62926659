"""The hook contract between Evret and its plugins.

A plugin is a module (or object) with functions decorated by :data:`evret_core.hookimpl` whose names are
the hooks below. Each ``register_*`` hook receives a ``register(name, factory)`` callable (a :class:`Register` of the
kind's base); ``factory(**options)`` builds the object when a user asks for ``name``. Keep heavy imports (SDKs, torch)
inside the factory, or register ``lazy("package.module:Name")``, so that loading and listing plugins stays fast.

Never give a hookimpl argument a default value: pluggy ignores it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import pluggy

from evret_core.contracts.claims import ClaimJudge
from evret_core.contracts.conversation import Rewriter
from evret_core.contracts.data import RetrievalEvaluator
from evret_core.contracts.errors import PluginError
from evret_core.contracts.executor import Executor
from evret_core.contracts.generation import Generator
from evret_core.contracts.judge import Judge
from evret_core.contracts.kinds import KINDS, OTHER_HOOKS, Kind
from evret_core.contracts.metric import Metric
from evret_core.contracts.output import RecordsEvaluator
from evret_core.contracts.perturb import Perturbation
from evret_core.contracts.provider import LLMProvider
from evret_core.contracts.rag_score import RagScore
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import Retriever

PROJECT_NAME = "evret"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Register(Protocol[T_contra]):
    """The ``register`` callable handed to every ``register_*`` hook: ``Register[Judge]`` takes factories of
    judges, so registering anything else is a type error."""

    def __call__(self, name: str, factory: Callable[..., T_contra]) -> None: ...


class Registrar(Generic[T]):
    """The :class:`Register` the loader hands to one plugin's hook of one kind: checks and collects."""

    def __init__(self, kind: Kind[T], plugin: str, items: list[tuple[str, Callable[..., Any]]]) -> None:
        self.kind, self.plugin, self.items = kind, plugin, items

    def __call__(self, name: str, factory: Callable[..., T]) -> None:
        label = self.kind.singular
        if not isinstance(name, str) or not name:
            raise PluginError(f"{label} name must be a non-empty string, got {name!r}")
        if not callable(factory):
            raise PluginError(f"{label} {name!r}: factory is not callable")
        if any(seen == name for seen, _ in self.items):
            raise PluginError(f"plugin {self.plugin!r} registers {label} {name!r} twice")
        self.items.append((name, factory))


class LazyFactory:
    """A factory named ``"package.module:Name"``, imported on first use; calls, ``inspect.signature`` (option
    checks) and ``load()`` see the real class."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._loaded: Any = None

    def load(self) -> Any:
        if self._loaded is None:
            module, _, name = self.target.partition(":")
            self._loaded = getattr(importlib.import_module(module), name)
        return self._loaded

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.load())

    def __repr__(self) -> str:
        return f"LazyFactory({self.target!r})"


def lazy(target: str, **attributes: Any) -> LazyFactory:
    """A factory for ``register(name, factory)`` named ``"package.module:Name"``, imported when the name is first
    used, so that loading the plugin imports neither the class nor its libraries. ``attributes`` are set on the
    factory for Evret to read without building anything (``default_model`` of an LLM provider)::

        @hookimpl
XX, lazy("evret_chroma.retriever:ChromaRetriever"))
    """
    factory = LazyFactory(target)
    for key, value in attributes.items():
        setattr(factory, key, value)
    return factory


@hookspec
def register_judges(register: Register[Judge]) -> None:
    """Register judges: objects that decide whether a retrieved text matches an expected answer text.

    :param register: call ``register(name, factory)`` once per judge; ``factory(**options)`` returns an
        :class:`evret_core.contracts.judge.Judge`. ``name`` is what users pass to ``create_judge`` and ``--judge``.
    """


@hookspec
def register_metrics(register: Register[Metric]) -> None:
    """Register metric families, such as ``ndcg`` for ``ndcg@10``.

    :param register: call ``register(name, factory)`` once per family; ``factory(k=None, **options)`` returns an
        :class:`evret_core.contracts.metric.Metric`. ``create_metric("ndcg@10")`` calls the ``ndcg`` factory with ``k=10``.
    """


@hookspec
def register_retrievers(register: Register[Retriever]) -> None:
    """Register retrievers by name, such as ``bm25`` or ``qdrant``.

    :param register: call ``register(name, factory)`` once per retriever; ``factory(**options)`` returns an object
        with ``retrieve(query, k)`` and ``batch_retrieve(queries, k)`` (see :class:`evret_core.contracts.retrieve.Retriever`).
        A factory may accept ``dataset`` (the :class:`~evret_core.io.datasets.EvaluationDataset` being evaluated) to index
        the dataset's own corpus when no corpus file is given.
    """


@hookspec
def register_evaluators(register: Register[RecordsEvaluator]) -> None:
    """Register output evaluator types: they score records (pipeline outputs), such as ``exact``, ``regex``,
    ``llm-score`` or the criteria judges ``direct`` and ``pairwise``.

    :param register: call ``register(name, factory)`` once per type; ``factory(**options)`` returns an object with
        ``evaluate(records: list[dict]) -> results``. ``name`` is what ``create_evaluator`` and
        ``evret score --evaluator`` take. Evaluators of a retriever on a dataset register through
        :func:`register_retrieval_evaluators` instead.
    """


@hookspec
def register_retrieval_evaluators(register: Register[RetrievalEvaluator]) -> None:
    """Register retrieval evaluator types: they score a retriever on a dataset, such as the built-in ``retrieval``.

    :param register: call ``register(name, factory)`` once per type; ``factory(retriever, metrics, **options)``
        returns an object with ``evaluate(dataset: EvaluationDataset) -> EvaluationResults``. ``name`` is what
        ``create_retrieval_evaluator`` takes.
    """


@hookspec
def register_llm_providers(register: Register[LLMProvider]) -> None:
    """Register LLM providers, such as ``openai``, ``anthropic`` or ``google``.

    :param register: call ``register(name, factory)`` once per provider; ``factory(model=None, api_key=None,
        base_url=None, **options)`` returns an :class:`evret_core.contracts.provider.LLMProvider`: an async chat-completion
        interface that returns text plus token usage.
    """


@hookspec
def register_generators(register: Register[Generator]) -> None:
    """Register RAG generators, such as ``extractive``.

    :param register: call ``register(name, factory)`` once per generator; ``factory(**options)`` returns an object
        with ``batch_generate(requests) -> list[Answer | None]`` (subclass :class:`evret_core.rag.Generator` and
        implement ``generate(request)``): each :class:`~evret_core.rag.GenerationRequest` carries the question, its
        contexts with ids and the condition; the :class:`~evret_core.rag.Answer` holds the text, the claims with
        the context ids they cite, and the refused flag. ``name`` is what ``evret rag --generator`` takes.
    """


@hookspec
def register_perturbations(register: Register[Perturbation]) -> None:
    """Register adversarial perturbation families for ``evret rag --adversarial``.

    :param register: call ``register(name, factory)`` once per family; ``factory(**options)`` returns a
        perturbation: a callable ``(question, contexts, questions, rng) -> ConditionCase`` that builds the contexts a
        generator sees (and, when it changes what is right, the expected behaviour) from the base condition's
        contexts; ``rng`` is a numpy Generator seeded per question. Record what was planted in the case's ``info``
        (with ``"family": name`` the adversarial summary counts its outcomes). ``name`` is what ``--adversarial``
        takes; the built-ins are counterfactual, injection, missing-gold and irrelevant-only.
    """


@hookspec
def register_claim_judges(register: Register[ClaimJudge]) -> None:
    """Register RAG claim judges: they decide whether each claim of an answer is supported by the contexts the
    generator saw, such as the built-in ``lexical`` (any Evret judge per claim and context) and ``llm``.

    :param register: call ``register(name, factory)`` once per claim judge; ``factory(**options)`` returns a
        :class:`evret_core.rag.ClaimJudge`: ``judge_claims(tasks)`` gives one list of
        :class:`~evret_core.rag.ClaimVerdict` per :class:`~evret_core.rag.ClaimTask` (optionally ``async
        ajudge_task(task)`` for one task). ``name`` is what ``RagEvaluator(claim_judge=...)`` and ``evret rag
        --claim-judge`` take; a name no claim judge has is taken as an Evret judge's for the lexical claim judge.
    """


@hookspec
def register_rag_scores(register: Register[RagScore]) -> None:
    """Register RAG scores: what ``evret rag`` computes per question and condition from the answer, the contexts,
    the claim verdicts and the question's labels, such as the built-in ``claims``, ``answer-match`` and
    ``behaviour``.

    :param register: call ``register(name, factory)`` once per score; ``factory()`` returns a
        :class:`evret_core.rag.RagScore` whose ``metrics`` name the scores ``score(item)`` returns for one
        :class:`~evret_core.rag.ScoreInput` (numbers, or None when not applicable). Every registered score is
        computed; its means and intervals appear in the results' ``generation`` section and the terminal table.
    """


@hookspec
def register_executors(register: Register[Executor]) -> None:
    """Register executors: engines that run the expensive stages of an evaluation (retrieval batches, judging,
    metric chunks), such as ``ray``. ``local`` (this process) is built in.

    :param register: call ``register(name, factory)`` once per executor; ``factory(**options)`` returns an
        :class:`evret_core.contracts.executor.Executor`. ``name`` is what users pass as ``Evaluator(executor=...)``,
        ``--executor`` or the config key ``executor``. An executor must give the same scores as ``local``.
    """


@hookspec
def register_rerankers(register: Register[Reranker]) -> None:
    """Register rerankers: they re-score and re-order a query's candidates (from a first-stage retriever), such as
    the built-in ``llm`` or ``cross-encoder`` and ``embedding`` of evret-sentence-transformers.

    :param register: call ``register(name, factory)`` once per reranker; ``factory(**options)`` returns an
        :class:`evret_core.contracts.rerank.Reranker` (implement ``score(query, candidates)`` or
        ``batch_score(queries, candidates)``). ``name`` is what ``create_reranker`` and the ``rerank`` retriever's
        ``reranker`` option take.
    """


@hookspec
def register_rewriters(register: Register[Rewriter]) -> None:
    """Register rewriters: they turn a conversation's user message into a standalone search query given the
    conversation before it (the ``rewriter`` query form of a conversation run), such as the built-in ``llm`` and
    ``carry-terms``.

    :param register: call ``register(name, factory)`` once per rewriter; ``factory(**options)`` returns an
        :class:`evret_core.contracts.conversation.Rewriter` (implement ``rewrite(request)`` or
        ``batch_rewrite(requests)``; None for a turn it could not rewrite). ``name`` is what ``create_rewriter``
        and ``--rewriter`` take.
    """


@hookspec(firstresult=True)
def adapt_retriever(obj: Any) -> Any:
    """Turn a foreign object (a LangChain retriever, a vector store...) into an Evret retriever.

    :param obj: whatever the user passed as ``retriever`` that is neither an Evret retriever, a callable nor a
        precomputed run.
    :return: an object with ``retrieve``/``batch_retrieve``, or None when this plugin does not know ``obj``. The
        first non-None answer wins.
    """


HOOK_NAMES = (*(kind.hook for kind in KINDS), *OTHER_HOOKS)
"""Every hook: one ``register_*`` per kind of :data:`evret_core.contracts.kinds.KINDS`, then the other hooks."""
