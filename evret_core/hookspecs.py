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
        :class:`evret_core.judges.Judge`. ``name`` is what users pass to ``create_judge`` and ``--judge``.
    """


@hookspec
def register_metrics(register: Register) -> None:
    """Register metric families, such as ``ndcg`` for ``ndcg@10``.

    :param register: call ``register(name, factory)`` once per family; ``factory(k=None, **options)`` returns an
        :class:`evret_core.metrics.Metric`. ``create_metric("ndcg@10")`` calls the ``ndcg`` factory with ``k=10``.
    """


@hookspec
def register_retrievers(register: Register) -> None:
    """Register retrievers by name, such as ``bm25`` or ``qdrant``.

    :param register: call ``register(name, factory)`` once per retriever; ``factory(**options)`` returns an object
        with ``retrieve(query, k)`` and ``batch_retrieve(queries, k)`` (see :class:`evret_core.retrievers.Retriever`).
        A factory may accept ``dataset`` (the :class:`~evret_core.models.EvaluationDataset` being evaluated) to index
        the dataset's own corpus when no corpus file is given.
    """


@hookspec
def register_evaluators(register: Register) -> None:
    """Register evaluator types, such as ``retrieval`` or the output evaluators ``exact`` and ``llm-score``.

    :param register: call ``register(name, factory)`` once per type; ``factory(**options)`` returns an object with
        an ``evaluate(data)`` method: the retrieval evaluator takes an :class:`~evret_core.models.EvaluationDataset`,
        output evaluators take a list of records.
    """


@hookspec
def register_llm_providers(register: Register) -> None:
    """Register LLM providers, such as ``openai``, ``anthropic`` or ``google``.

    :param register: call ``register(name, factory)`` once per provider; ``factory(model=None, api_key=None,
        base_url=None, **options)`` returns an :class:`evret_core.llm.LLMProvider`: an async chat-completion
        interface that returns text plus token usage.
    """


@hookspec
def register_executors(register: Register) -> None:
    """Register executors: engines that run the expensive stages of an evaluation (retrieval batches, judging,
    metric chunks), such as ``ray``. ``local`` (this process) is built in.

    :param register: call ``register(name, factory)`` once per executor; ``factory(**options)`` returns an
        :class:`evret_core.executors.Executor`. ``name`` is what users pass as ``Evaluator(executor=...)``,
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


HOOK_NAMES = (
    "register_judges",
    "register_metrics",
    "register_retrievers",
    "register_evaluators",
    "register_llm_providers",
    "register_executors",
    "adapt_retriever",
)
