"""Evret: evaluate RAG retrieval against expected answer texts, with trec_eval-exact IR metrics.

The public API is re-exported here; nothing heavy is imported at package import time.
"""

from evret_core.criteria import (
    Criteria,
    CriteriaOption,
    DirectJudge,
    MultiCriteria,
    MultiCriteriaItem,
    PairwiseJudge,
)
from evret_core.errors import EvretError, PluginError, UnknownNameError
from evret_core.evaluators.retrieval import Evaluator
from evret_core.executors import Executor
from evret_core.hookspecs import hookimpl
from evret_core.judges import ExactJudge, Judge, RegexJudge, TokenOverlapJudge
from evret_core.metrics import MRR, NDCG, AveragePrecision, HitRate, Metric, Precision, RankedBatch, Recall
from evret_core.metrics.engine import evaluate_rankings, evaluate_run
from evret_core.metrics.trec import read_qrels, read_run, write_run
from evret_core.models import EvaluationDataset, JudgmentContext, QueryExample, RetrievalResult
from evret_core.plugins import list_plugins
from evret_core.registry import (
    create_evaluator,
    create_executor,
    create_judge,
    create_llm_provider,
    create_metric,
    create_retriever,
)
from evret_core.results import EvaluationResults, QueryResult
from evret_core.retrievers import Retriever

__version__ = "0.1.0"

__all__ = [
    "AveragePrecision",
    "Criteria",
    "CriteriaOption",
    "DirectJudge",
    "MultiCriteria",
    "MultiCriteriaItem",
    "PairwiseJudge",
    "EvaluationDataset",
    "EvaluationResults",
    "Evaluator",
    "Executor",
    "EvretError",
    "ExactJudge",
    "HitRate",
    "Judge",
    "JudgmentContext",
    "MRR",
    "Metric",
    "NDCG",
    "PluginError",
    "Precision",
    "QueryExample",
    "QueryResult",
    "RankedBatch",
    "Recall",
    "RegexJudge",
    "RetrievalResult",
    "Retriever",
    "TokenOverlapJudge",
    "UnknownNameError",
    "create_evaluator",
    "create_executor",
    "create_judge",
    "create_llm_provider",
    "create_metric",
    "create_retriever",
    "hookimpl",
    "list_plugins",
    "evaluate_run",
    "evaluate_rankings",
    "read_qrels",
    "read_run",
    "write_run",
]
