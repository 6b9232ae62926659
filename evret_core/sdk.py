"""The plugin SDK: the one module a plugin's package imports from Evret.

Everything a plugin builds on is re-exported here: the hook marker, ``Register`` and ``lazy``, the base class of
every kind and the value types they take and return (plain frozen dataclasses), the errors, the LLM provider base,
the helpers of retriever and vector-store plugins, recipes and the stage functions an executor runs on its
workers. Plugins import nothing else from ``evret_core`` (``tests/plugins/test_plugin_sdk.py`` checks every plugin in
``plugins/``); a plugin's own tests also use :mod:`evret_core.testing` (the conformance suites, the stub servers,
the vector-store kit) and the public API of ``evret_core`` as any user would.

Every name is imported here, eagerly: none of them loads numpy, pydantic, asyncio, sqlite3 or pytest, so importing
this module costs no more than loading a plugin may (``tests/plugins/test_plugin_sdk.py`` runs ``python -X importtime``).
"""

from evret_core.contracts.aio import run_sync
from evret_core.contracts.claims import ClaimJudge, ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Rewriter, RewriteRequest, Turn
from evret_core.contracts.data import Dataset, Question, Questions, RetrievalEvaluator
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import (
    Executor,
    GenerateRun,
    JudgeRun,
    RewriteRun,
    batch_retrieve,
    grade_chunk,
    judge_chunk,
    metric_values,
    rewrite_chunk,
    use_shared_limiter,
    verdict_of,
)
from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest, Generator
from evret_core.contracts.hooks import Register, hookimpl, lazy
from evret_core.contracts.judge import ContextColumns, Judge, JudgmentContext, report_progress
from evret_core.contracts.metric import Metric, RankedBatch
from evret_core.contracts.output import OutputEvaluator, OutputResults, RecordsEvaluator
from evret_core.contracts.perturb import ConditionCase, Perturbation
from evret_core.contracts.provider import ChatMessage, LLMCallError, LLMProvider, LLMResponse
from evret_core.contracts.rag_score import RagScore, ScoreInput
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult, Retriever
from evret_core.io.corpus import read_corpus
from evret_core.io.paths import default_cache_dir
from evret_core.io.redact import redact_text, redact_url
from evret_core.limits import FALSE_WORDS, TRUE_WORDS, check_bool
from evret_core.llm.providers import SDKProvider
from evret_core.plugins.builder import rebuild
from evret_core.plugins.recipes import Recipe, recipe_of
from evret_core.progress import quiet_model_loading
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
from evret_core.text import contains_tokens, normalized

__all__ = [
    "Answer",
    "ChatMessage",
    "Claim",
    "ClaimJudge",
    "ClaimTask",
    "ClaimVerdict",
    "ConditionCase",
    "Context",
    "ContextColumns",
    "Dataset",
    "EvretError",
    "Executor",
    "FALSE_WORDS",
    "GenerateRun",
    "GenerationRequest",
    "Generator",
    "Judge",
    "JudgeRun",
    "JudgmentContext",
    "LLMCallError",
    "LLMProvider",
    "LLMResponse",
    "Metric",
    "OutputEvaluator",
    "OutputResults",
    "PACKAGED_MODEL",
    "Perturbation",
    "QueryVectors",
    "Question",
    "Questions",
    "RagScore",
    "RankedBatch",
    "RankedColumns",
    "Recipe",
    "RecordsEvaluator",
    "Register",
    "Reranker",
    "ResolvedModel",
    "RetrievalEvaluator",
    "RetrievalResult",
    "Retriever",
    "RewriteRequest",
    "RewriteRun",
    "Rewriter",
    "SDKProvider",
    "ScoreInput",
    "TRUE_WORDS",
    "Turn",
    "batch_retrieve",
    "batched",
    "check_bool",
    "contains_tokens",
    "corpus_batches",
    "default_cache_dir",
    "distance_result",
    "grade_chunk",
    "hookimpl",
    "hub_endpoint",
    "hub_reachable",
    "judge_chunk",
    "lazy",
    "load_object",
    "metric_values",
    "normalized",
    "packaged_model_path",
    "quiet_model_loading",
    "read_corpus",
    "rebuild",
    "recipe_of",
    "redact_text",
    "redact_url",
    "report_progress",
    "resolve_embedder",
    "resolve_model",
    "rewrite_chunk",
    "run_sync",
    "use_shared_limiter",
    "verdict_of",
]
