"""The hook contract between Evret and its plugins.

A plugin is a module (or object) with functions decorated by :data:`evret_core.hookimpl` whose names are
the hooks below. Each ``register_*`` hook receives a ``register(name, factory)`` callable; ``factory(**options)``
builds the object when a user asks for ``name``. Keep heavy imports (SDKs, torch) inside the factory so that
loading and listing plugins stays fast.

Never give a hookimpl argument a default value: pluggy ignores it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import pluggy

PROJECT_NAME = "evret"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class Register(Protocol):
    """The ``register`` callable handed to every ``register_*`` hook."""

    def __call__(self, name: str, factory: Callable[..., Any]) -> None: ...


@hookspec
def register_judges(register: Register) -> None:
    """Register judges: objects that decide whether a retrieved text matches an expected answer text.

    :param register: call ``register(name, factory)`` once per judge; ``factory(**options)`` returns an
        :class:`evret_core.contracts.judge.Judge`. ``name`` is what users pass to ``create_judge`` and ``--judge``.
    """


@hookspec
def register_metrics(register: Register) -> None:
    """Register metric families, such as ``ndcg`` for ``ndcg@10``.

    :param register: call ``register(name, factory)`` once per family; ``factory(k=None, **options)`` returns an
        :class:`evret_core.contracts.metric.Metric`. ``create_metric("ndcg@10")`` calls the ``ndcg`` factory with ``k=10``.
    """


@hookspec
def register_retrievers(register: Register) -> None:
    """Register retrievers by name, such as ``bm25`` or ``qdrant``.

    :param register: call ``register(name, factory)`` once per retriever; ``factory(**options)`` returns an object
        with ``retrieve(query, k)`` and ``batch_retrieve(queries, k)`` (see :class:`evret_core.contracts.retrieve.Retriever`).
        A factory may accept ``dataset`` (the :class:`~evret_core.io.datasets.EvaluationDataset` being evaluated) to index
        the dataset's own corpus when no corpus file is given.
    """


@hookspec
def register_evaluators(register: Register) -> None:
    """Register output evaluator types: they score records (pipeline outputs), such as ``exact``, ``regex``,
    ``llm-score`` or the criteria judges ``direct`` and ``pairwise``.

    :param register: call ``register(name, factory)`` once per type; ``factory(**options)`` returns an object with
        ``evaluate(records: list[dict]) -> results``. ``name`` is what ``create_evaluator`` and
        ``evret score --evaluator`` take. Evaluators of a retriever on a dataset register through
        :func:`register_retrieval_evaluators` instead.
    """


@hookspec
def register_retrieval_evaluators(register: Register) -> None:
    """Register retrieval evaluator types: they score a retriever on a dataset, such as the built-in ``retrieval``.

    :param register: call ``register(name, factory)`` once per type; ``factory(retriever, metrics, **options)``
        returns an object with ``evaluate(dataset: EvaluationDataset) -> EvaluationResults``. ``name`` is what
        ``create_retrieval_evaluator`` takes.
    """


@hookspec
def register_llm_providers(register: Register) -> None:
    """Register LLM providers, such as ``openai``, ``anthropic`` or ``google``.

    :param register: call ``register(name, factory)`` once per provider; ``factory(model=None, api_key=None,
        base_url=None, **options)`` returns an :class:`evret_core.contracts.provider.LLMProvider`: an async chat-completion
        interface that returns text plus token usage.
    """


@hookspec
def register_generators(register: Register) -> None:
    """Register RAG generators, such as ``extractive``.

    :param register: call ``register(name, factory)`` once per generator; ``factory(**options)`` returns an object
        with ``batch_generate(requests) -> list[Answer | None]`` (subclass :class:`evret_core.rag.Generator` and
        implement ``generate(request)``): each :class:`~evret_core.rag.GenerationRequest` carries the question, its
        contexts with ids and the condition; the :class:`~evret_core.rag.Answer` holds the text, the claims with
        the context ids they cite, and the refused flag. ``name`` is what ``evret rag --generator`` takes.
    """


@hookspec
def register_perturbations(register: Register) -> None:
    """Register adversarial perturbation families for ``evret rag --adversarial``.

    :param register: call ``register(name, factory)`` once per family; ``factory(**options)`` returns a
        perturbation: a callable ``(question, contexts, questions, rng) -> ConditionCase`` that builds the contexts a
        generator sees (and, when it changes what is right, the expected behaviour) from the base condition's
        contexts; ``rng`` is a numpy Generator seeded per question. Record what was planted in the case's ``info``
        (with ``"family": name`` the adversarial summary counts its outcomes). ``name`` is what ``--adversarial``
        takes; the built-ins are counterfactual, injection, missing-gold and irrelevant-only.
    """


@hookspec
def register_claim_judges(register: Register) -> None:
    """Register RAG claim judges: they decide whether each claim of an answer is supported by the contexts the
    generator saw, such as the built-in ``lexical`` (any Evret judge per claim and context) and ``llm``.

    :param register: call ``register(name, factory)`` once per claim judge; ``factory(**options)`` returns a
        :class:`evret_core.rag.ClaimJudge`: ``judge_claims(tasks)`` gives one list of
        :class:`~evret_core.rag.ClaimVerdict` per :class:`~evret_core.rag.ClaimTask` (optionally ``async
        ajudge_task(task)`` for one task). ``name`` is what ``RagEvaluator(claim_judge=...)`` and ``evret rag
        --claim-judge`` take; a name no claim judge has is taken as an Evret judge's for the lexical claim judge.
    """


@hookspec
def register_rag_scores(register: Register) -> None:
    """Register RAG scores: what ``evret rag`` computes per question and condition from the answer, the contexts,
    the claim verdicts and the question's labels, such as the built-in ``claims``, ``answer-match`` and
    ``behaviour``.

    :param register: call ``register(name, factory)`` once per score; ``factory()`` returns a
        :class:`evret_core.rag.RagScore` whose ``metrics`` name the scores ``score(item)`` returns for one
        :class:`~evret_core.rag.ScoreInput` (numbers, or None when not applicable). Every registered score is
        computed; its means and intervals appear in the results' ``generation`` section and the terminal table.
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register executors: engines that run the expensive stages of an evaluation (retrieval batches, judging,
    metric chunks), such as ``ray``. ``local`` (this process) is built in.

    :param register: call ``register(name, factory)`` once per executor; ``factory(**options)`` returns an
        :class:`evret_core.contracts.executor.Executor`. ``name`` is what users pass as ``Evaluator(executor=...)``,
        ``--executor`` or the config key ``executor``. An executor must give the same scores as ``local``.
    """


@hookspec(firstresult=True)
def adapt_retriever(obj: Any) -> Any:
    """Turn a foreign object (a LangChain retriever, a vector store...) into an Evret retriever.

    :param obj: whatever the user passed as ``retriever`` that is neither an Evret retriever, a callable nor a
        precomputed run.
    :return: an object with ``retrieve``/``batch_retrieve``, or None when this plugin does not know ``obj``. The
        first non-None answer wins.
    """


def _hook_names() -> tuple[str, ...]:
    from evret_core.plugins.kinds import KINDS, OTHER_HOOKS

    return (*(kind.hook for kind in KINDS), *OTHER_HOOKS)


HOOK_NAMES = _hook_names()
"""Every hook: one ``register_*`` per kind of :data:`evret_core.plugins.kinds.KINDS`, then the other hooks."""
