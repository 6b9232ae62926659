"""The plugin SDK: the one module a plugin's package imports from Evret.

Everything a plugin builds on is re-exported here: the hook marker and ``Register``, the base classes of every kind
(:data:`KINDS`), the models and contexts they take and return, the errors, the LLM provider base, the helpers of
retriever and vector-store plugins, what an executor needs to run stages, and the conformance suites of the testing
kit. Plugins import nothing else from ``evret_core`` (``tests/test_plugin_sdk.py`` checks every plugin in
``plugins/``); a plugin's own tests also use :mod:`evret_core.testing` (the stub servers, the vector-store kit) and
the public API of ``evret_core`` as any user would.

Importing this module is as light as loading a plugin must be (pluggy, no numpy, no pydantic): only the hook
marker, ``Register`` and :func:`lazy` load with it (with the contracts their hooks are typed by); every other name is
imported on first use (PEP 562), so
``from evret_core.sdk import RetrievalResult`` costs pydantic in the module that needs it, not at plugin load.
The conformance suites import pytest, so they load only when a test asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evret_core.contracts.hooks import Register, hookimpl, lazy
from evret_core.lazy import lazy_export

# public name -> the module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    # the table of kinds and building by name
    "KINDS": "evret_core.contracts.kinds",
    "Kind": "evret_core.contracts.kinds",
    "RecordsEvaluator": "evret_core.contracts.output",
    "create": "evret_core.plugins.registry",
    "create_judge": "evret_core.plugins.registry",
    "create_retriever": "evret_core.plugins.registry",
    # recipes: how a part was built, so that an executor rebuilds it on a worker
    "Recipe": "evret_core.plugins.recipes",
    "rebuild": "evret_core.plugins.builder",
    "recipe": "evret_core.plugins.recipes",
    "recipe_of": "evret_core.plugins.recipes",
    # errors
    "EvretError": "evret_core.contracts.errors",
    "PluginError": "evret_core.contracts.errors",
    "UnknownNameError": "evret_core.contracts.errors",
    # models and contexts
    "EvaluationDataset": "evret_core.io.datasets",
    "JudgmentContext": "evret_core.contracts.judge",
    "QueryExample": "evret_core.io.queries",
    "RetrievalResult": "evret_core.contracts.retrieve",
    "ContextColumns": "evret_core.contracts.judge",
    # judges
    "Judge": "evret_core.contracts.judge",
    "contains_tokens": "evret_core.text",
    "normalized": "evret_core.text",
    "report_progress": "evret_core.contracts.judge",
    # retrievers and vector stores
    "Retriever": "evret_core.contracts.retrieve",
    "RankedColumns": "evret_core.contracts.retrieve",
    "read_corpus": "evret_core.io.corpus",
    "run_sync": "evret_core.contracts.aio",
    "batched": "evret_core.retrieve.vectorstores",
    "corpus_batches": "evret_core.retrieve.vectorstores",
    "distance_result": "evret_core.retrieve.vectorstores",
    "resolve_embedder": "evret_core.retrieve.vectorstores",
    "load_object": "evret_core.retrieve.vectorstores",
    "QueryVectors": "evret_core.retrieve.vectorstores",
    "default_cache_dir": "evret_core.io.paths",
    # sentence-transformers model names, resolved offline first
    "PACKAGED_MODEL": "evret_core.retrieve.embedding_models",
    "ResolvedModel": "evret_core.retrieve.embedding_models",
    "hub_endpoint": "evret_core.retrieve.embedding_models",
    "hub_reachable": "evret_core.retrieve.embedding_models",
    "packaged_model_path": "evret_core.retrieve.embedding_models",
    "resolve_model": "evret_core.retrieve.embedding_models",
    # no third-party progress bars while a model loads
    "quiet_model_loading": "evret_core.progress",
    # credentials out of messages (the one redaction rule)
    "redact_text": "evret_core.io.redact",
    # the one reading of a yes/no option
    "check_bool": "evret_core.limits",
    "TRUE_WORDS": "evret_core.limits",
    "FALSE_WORDS": "evret_core.limits",
    "redact_url": "evret_core.io.redact",
    # output evaluators, and the retrieval evaluator to subclass
    "Evaluator": "evret_core.evaluation.evaluator",
    "OutputEvaluator": "evret_core.contracts.output",
    "OutputResults": "evret_core.contracts.output",
    "CriteriaJudge": "evret_core.criteria",
    # LLM providers
    "LLMProvider": "evret_core.contracts.provider",
    "SDKProvider": "evret_core.llm.providers",
    "ChatMessage": "evret_core.contracts.provider",
    "LLMResponse": "evret_core.contracts.provider",
    "LLMCallError": "evret_core.contracts.provider",
    "use_shared_limiter": "evret_core.contracts.executor",
    "JudgmentCache": "evret_core.llm.cache",
    # metrics
    "Metric": "evret_core.contracts.metric",
    "RankedBatch": "evret_core.contracts.metric",
    # executors: the base and the stage functions an engine runs on its workers
    "Executor": "evret_core.contracts.executor",
    "GenerateRun": "evret_core.contracts.executor",
    "JudgeRun": "evret_core.contracts.executor",
    "batch_retrieve": "evret_core.contracts.executor",
    "judge_chunk": "evret_core.contracts.executor",
    "metric_values": "evret_core.contracts.executor",
    # RAG: generators, perturbations, and the pipeline an executor rebuilds on a worker
    "Answer": "evret_core.contracts.generation",
    "Claim": "evret_core.contracts.generation",
    "GenerationRequest": "evret_core.contracts.generation",
    "Generator": "evret_core.contracts.generation",
    "ConditionCase": "evret_core.contracts.perturb",
    "Context": "evret_core.contracts.generation",
    "Perturbation": "evret_core.contracts.perturb",
    "ClaimJudge": "evret_core.contracts.claims",
    "ClaimTask": "evret_core.contracts.claims",
    "ClaimVerdict": "evret_core.contracts.claims",
    "RagScore": "evret_core.contracts.rag_score",
    "ScoreInput": "evret_core.contracts.rag_score",
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
    "PACKAGED_MODEL",
    "Perturbation",
    "PerturbationConformance",
    "PluginError",
    "ProviderConformance",
    "QueryVectors",
    "QueryExample",
    "RagScore",
    "RagScoreConformance",
    "RankedBatch",
    "Recipe",
    "RankedColumns",
    "RecordsEvaluator",
    "Register",
    "ResolvedModel",
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
    "hub_endpoint",
    "hub_reachable",
    "judge_chunk",
    "lazy",
    "load_object",
    "metric_values",
    "normalized",
    "packaged_model_path",
    "read_corpus",
    "rebuild",
    "recipe",
    "recipe_of",
    "quiet_model_loading",
    "redact_text",
    "check_bool",
    "TRUE_WORDS",
    "FALSE_WORDS",
    "redact_url",
    "report_progress",
    "resolve_embedder",
    "resolve_model",
    "run_sync",
    "use_shared_limiter",
]


def __getattr__(name: str) -> Any:
    return lazy_export(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers see: the same names, imported eagerly
    from evret_core.contracts.aio import run_sync
    from evret_core.contracts.claims import ClaimJudge, ClaimTask, ClaimVerdict
    from evret_core.contracts.errors import EvretError, PluginError, UnknownNameError
    from evret_core.contracts.executor import (
        Executor,
        GenerateRun,
        JudgeRun,
        batch_retrieve,
        judge_chunk,
        metric_values,
        use_shared_limiter,
    )
    from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest, Generator
    from evret_core.contracts.judge import ContextColumns, Judge, JudgmentContext, report_progress
    from evret_core.contracts.kinds import KINDS, Kind
    from evret_core.contracts.metric import Metric, RankedBatch
    from evret_core.contracts.output import OutputEvaluator, OutputResults, RecordsEvaluator
    from evret_core.contracts.perturb import ConditionCase, Perturbation
    from evret_core.contracts.provider import ChatMessage, LLMCallError, LLMProvider, LLMResponse
    from evret_core.contracts.rag_score import RagScore, ScoreInput
    from evret_core.contracts.retrieve import RankedColumns, RetrievalResult, Retriever
    from evret_core.criteria import CriteriaJudge
    from evret_core.evaluation.evaluator import Evaluator
    from evret_core.io.corpus import read_corpus
    from evret_core.io.datasets import EvaluationDataset
    from evret_core.io.paths import default_cache_dir
    from evret_core.io.queries import QueryExample
    from evret_core.io.redact import redact_text, redact_url
    from evret_core.limits import FALSE_WORDS, TRUE_WORDS, check_bool
    from evret_core.llm.cache import JudgmentCache
    from evret_core.llm.providers import SDKProvider
    from evret_core.plugins.builder import rebuild
    from evret_core.plugins.recipes import Recipe, recipe, recipe_of
    from evret_core.plugins.registry import create, create_judge, create_retriever
    from evret_core.progress import quiet_model_loading
    from evret_core.rag.pipeline import Runner, build_parts
    from evret_core.retrieve.embedding_models import (
        PACKAGED_MODEL,
        ResolvedModel,
        hub_endpoint,
        hub_reachable,
        packaged_model_path,
        resolve_model,
    )
    from evret_core.retrieve.vectorstores import (
        QueryVectors,
        batched,
        corpus_batches,
        distance_result,
        load_object,
        resolve_embedder,
    )
    from evret_core.testing.claim_judge_suite import ClaimJudgeConformance
    from evret_core.testing.executor_suite import ExecutorConformance
    from evret_core.testing.generator_suite import GeneratorConformance
    from evret_core.testing.judge_suite import JudgeConformance
    from evret_core.testing.local_providers import InProcessProviderConformance
    from evret_core.testing.metric_suite import MetricConformance
    from evret_core.testing.output_evaluator_suite import OutputEvaluatorConformance
    from evret_core.testing.perturbation_suite import PerturbationConformance
    from evret_core.testing.provider_suite import ProviderConformance
    from evret_core.testing.rag_score_suite import RagScoreConformance
    from evret_core.testing.retrieval_evaluator_suite import RetrievalEvaluatorConformance
    from evret_core.testing.retriever_suite import RetrieverConformance
    from evret_core.text import contains_tokens, normalized
