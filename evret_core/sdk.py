"""The plugin SDK: the one module a plugin's package imports from Evret.

Everything a plugin builds on is re-exported here: the hook marker and ``Register``, the base classes of every kind
(:data:`KINDS`), the models and contexts they take and return, the errors, the LLM provider base, the helpers of
retriever and vector-store plugins, what an executor needs to run stages, and the conformance suites of the testing
kit. Plugins import nothing else from ``evret_core`` (``tests/test_plugin_sdk.py`` checks every plugin in
``plugins/``); a plugin's own tests also use :mod:`evret_core.testing` (the stub servers, the vector-store kit) and
the public API of ``evret_core`` as any user would.

Importing this module is as light as loading a plugin must be (pluggy, no numpy, no pydantic): only the hook
marker, ``Register`` and :func:`lazy` load with it; every other name is imported on first use (PEP 562), so
``from evret_core.sdk import RetrievalResult`` costs pydantic in the module that needs it, not at plugin load.
The conformance suites import pytest, so they load only when a test asks for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


def lazy(target: str, **attributes: Any) -> LazyFactory:
    """A factory for ``register(name, factory)`` named ``"package.module:Name"``, imported when the name is first
    used, so that loading the plugin imports neither the class nor its libraries. ``attributes`` are set on the
    factory for Evret to read without building anything (``default_model`` of an LLM provider)::

        @hookimpl
        def register_retrievers(register: Register) -> None:
            register("chroma", lazy("evret_chroma.retriever:ChromaRetriever"))
    """
    factory = LazyFactory(target)
    for key, value in attributes.items():
        setattr(factory, key, value)
    return factory


# public name -> the module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    # the table of kinds and building by name
    "KINDS": "evret_core.kinds",
    "Kind": "evret_core.kinds",
    "RecordsEvaluator": "evret_core.kinds",
    "create": "evret_core.registry",
    "create_judge": "evret_core.registry",
    "create_retriever": "evret_core.registry",
    "recipe": "evret_core.registry",
    # errors
    "EvretError": "evret_core.errors",
    "PluginError": "evret_core.errors",
    "UnknownNameError": "evret_core.errors",
    # models and contexts
    "EvaluationDataset": "evret_core.models",
    "JudgmentContext": "evret_core.models",
    "QueryExample": "evret_core.models",
    "RetrievalResult": "evret_core.models",
    "ContextColumns": "evret_core.context_columns",
    # judges
    "Judge": "evret_core.judges",
    "contains_tokens": "evret_core.judges.normalize",
    "normalized": "evret_core.judges.normalize",
    "report_progress": "evret_core.judges.base",
    # retrievers and vector stores
    "Retriever": "evret_core.retrievers",
    "RankedColumns": "evret_core.retrievers",
    "read_corpus": "evret_core.corpus",
    "run_sync": "evret_core.aio",
    "batched": "evret_core.vectorstores",
    "corpus_batches": "evret_core.vectorstores",
    "distance_result": "evret_core.vectorstores",
    "resolve_embedder": "evret_core.vectorstores",
    "load_object": "evret_core.vectorstores",
    "QueryVectors": "evret_core.vectorstores",
    "default_cache_dir": "evret_core.cache",
    # output evaluators, and the retrieval evaluator to subclass
    "Evaluator": "evret_core.evaluators.retrieval",
    "OutputEvaluator": "evret_core.evaluators.output",
    "OutputResults": "evret_core.evaluators.output",
    "CriteriaJudge": "evret_core.criteria",
    # LLM providers
    "LLMProvider": "evret_core.llm",
    "SDKProvider": "evret_core.llm",
    "ChatMessage": "evret_core.llm",
    "LLMResponse": "evret_core.llm",
    "LLMCallError": "evret_core.llm",
    "use_shared_limiter": "evret_core.llm",
    "JudgmentCache": "evret_core.llm.cache",
    # metrics
    "Metric": "evret_core.metrics.base",
    "RankedBatch": "evret_core.metrics.base",
    # executors: the base and the stage functions an engine runs on its workers
    "Executor": "evret_core.executors",
    "GenerateRun": "evret_core.executors",
    "JudgeRun": "evret_core.executors",
    "batch_retrieve": "evret_core.executors",
    "judge_chunk": "evret_core.executors",
    "metric_values": "evret_core.executors",
    # RAG: generators, perturbations, and the pipeline an executor rebuilds on a worker
    "Answer": "evret_core.rag.generators",
    "Claim": "evret_core.rag.generators",
    "GenerationRequest": "evret_core.rag.generators",
    "Generator": "evret_core.rag.generators",
    "ConditionCase": "evret_core.rag.contexts",
    "Context": "evret_core.rag.contexts",
    "Perturbation": "evret_core.rag.contexts",
    "ClaimJudge": "evret_core.rag.claims",
    "ClaimTask": "evret_core.rag.claims",
    "ClaimVerdict": "evret_core.rag.claims",
    "RagScore": "evret_core.rag.scoring",
    "ScoreInput": "evret_core.rag.scoring",
    "Runner": "evret_core.rag.pipeline",
    "build_parts": "evret_core.rag.pipeline",
    # the testing kit's conformance suites (they import pytest)
    "ClaimJudgeConformance": "evret_core.testing",
    "ExecutorConformance": "evret_core.testing",
    "GeneratorConformance": "evret_core.testing",
    "MetricConformance": "evret_core.testing",
    "OutputEvaluatorConformance": "evret_core.testing",
    "PerturbationConformance": "evret_core.testing",
    "RetrievalEvaluatorConformance": "evret_core.testing",
    "JudgeConformance": "evret_core.testing",
    "InProcessProviderConformance": "evret_core.testing",
    "ProviderConformance": "evret_core.testing",
    "RagScoreConformance": "evret_core.testing",
    "RetrieverConformance": "evret_core.testing",
}

__all__ = [
    "Answer",
    "ChatMessage",
    "Claim",
    "ClaimJudge",
    "ClaimJudgeConformance",
    "ClaimTask",
    "ClaimVerdict",
    "ConditionCase",
    "Context",
    "ContextColumns",
    "CriteriaJudge",
    "EvaluationDataset",
    "Evaluator",
    "EvretError",
    "Executor",
    "ExecutorConformance",
    "GenerateRun",
    "GenerationRequest",
    "Generator",
    "GeneratorConformance",
    "Judge",
    "InProcessProviderConformance",
    "JudgeConformance",
    "JudgeRun",
    "JudgmentCache",
    "JudgmentContext",
    "KINDS",
    "Kind",
    "LLMCallError",
    "LLMProvider",
    "LLMResponse",
    "Metric",
    "MetricConformance",
    "OutputEvaluator",
    "OutputEvaluatorConformance",
    "OutputResults",
    "Perturbation",
    "PerturbationConformance",
    "PluginError",
    "ProviderConformance",
    "QueryVectors",
    "QueryExample",
    "RagScore",
    "RagScoreConformance",
    "RankedBatch",
    "RankedColumns",
    "RecordsEvaluator",
    "Register",
    "RetrievalEvaluatorConformance",
    "RetrievalResult",
    "Retriever",
    "RetrieverConformance",
    "Runner",
    "SDKProvider",
    "ScoreInput",
    "UnknownNameError",
    "batch_retrieve",
    "batched",
    "build_parts",
    "contains_tokens",
    "corpus_batches",
    "create",
    "create_judge",
    "create_retriever",
    "default_cache_dir",
    "distance_result",
    "hookimpl",
    "judge_chunk",
    "lazy",
    "load_object",
    "metric_values",
    "normalized",
    "read_corpus",
    "recipe",
    "report_progress",
    "resolve_embedder",
    "run_sync",
    "use_shared_limiter",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evret_core.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers see: the same names, imported eagerly
    from evret_core.aio import run_sync
    from evret_core.cache import default_cache_dir
    from evret_core.context_columns import ContextColumns
    from evret_core.corpus import read_corpus
    from evret_core.criteria import CriteriaJudge
    from evret_core.errors import EvretError, PluginError, UnknownNameError
    from evret_core.evaluators.output import OutputEvaluator, OutputResults
    from evret_core.evaluators.retrieval import Evaluator
    from evret_core.executors import (
        Executor,
        GenerateRun,
        JudgeRun,
        batch_retrieve,
        judge_chunk,
        metric_values,
    )
    from evret_core.judges import Judge
    from evret_core.judges.base import report_progress
    from evret_core.judges.normalize import contains_tokens, normalized
    from evret_core.kinds import KINDS, Kind, RecordsEvaluator
    from evret_core.llm import (
        ChatMessage,
        LLMCallError,
        LLMProvider,
        LLMResponse,
        SDKProvider,
        use_shared_limiter,
    )
    from evret_core.llm.cache import JudgmentCache
    from evret_core.metrics.base import Metric, RankedBatch
    from evret_core.models import EvaluationDataset, JudgmentContext, QueryExample, RetrievalResult
    from evret_core.rag.claims import ClaimJudge, ClaimTask, ClaimVerdict
    from evret_core.rag.contexts import ConditionCase, Context, Perturbation
    from evret_core.rag.generators import Answer, Claim, GenerationRequest, Generator
    from evret_core.rag.pipeline import Runner, build_parts
    from evret_core.rag.scoring import RagScore, ScoreInput
    from evret_core.registry import create, create_judge, create_retriever, recipe
    from evret_core.retrievers import RankedColumns, Retriever
    from evret_core.testing.claim_judges import ClaimJudgeConformance
    from evret_core.testing.evaluators import OutputEvaluatorConformance
    from evret_core.testing.executors import ExecutorConformance
    from evret_core.testing.generators import GeneratorConformance
    from evret_core.testing.judges import JudgeConformance
    from evret_core.testing.local_providers import InProcessProviderConformance
    from evret_core.testing.metrics import MetricConformance
    from evret_core.testing.perturbations import PerturbationConformance
    from evret_core.testing.providers import ProviderConformance
    from evret_core.testing.rag_scores import RagScoreConformance
    from evret_core.testing.retrieval_evaluators import RetrievalEvaluatorConformance
    from evret_core.testing.retrievers import RetrieverConformance
    from evret_core.vectorstores import (
        QueryVectors,
        batched,
        corpus_batches,
        distance_result,
        load_object,
        resolve_embedder,
    )
