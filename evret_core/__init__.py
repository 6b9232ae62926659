"""Evret: evaluate RAG retrieval against expected answer texts, with trec_eval-exact IR metrics.

The public API is re-exported here and loaded lazily (PEP 562 module ``__getattr__``): ``import evret_core``
imports no submodule but ``lazy`` and ``version``, so numpy, pydantic and the judges load on the first use of a
name that needs them, and ``evret --help`` and ``evret plugins`` stay fast.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from evret_core.lazy import lazy_export
from evret_core.version import __version__ as __version__

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Criteria": "evret_core.criteria",
    "CriteriaOption": "evret_core.criteria",
    "DirectJudge": "evret_core.criteria",
    "MultiCriteria": "evret_core.criteria",
    "MultiCriteriaItem": "evret_core.criteria",
    "PairwiseJudge": "evret_core.criteria",
    "EvretError": "evret_core.contracts.errors",
    "PluginError": "evret_core.contracts.errors",
    "UnknownNameError": "evret_core.contracts.errors",
    "Evaluator": "evret_core.evaluation.evaluator",
    "Executor": "evret_core.contracts.executor",
    "hookimpl": "evret_core.contracts.hooks",
    "ContainsJudge": "evret_core.judge",
    "ExactJudge": "evret_core.judge",
    "Judge": "evret_core.contracts.judge",
    "RegexJudge": "evret_core.judge",
    "TokenOverlapJudge": "evret_core.judge",
    "LLMJudge": "evret_core.judge.llm",
    "MRR": "evret_core.metrics",
    "NDCG": "evret_core.metrics",
    "AveragePrecision": "evret_core.metrics",
    "HitRate": "evret_core.metrics",
    "Metric": "evret_core.contracts.metric",
    "Precision": "evret_core.metrics",
    "RankedBatch": "evret_core.contracts.metric",
    "Recall": "evret_core.metrics",
    "evaluate_rankings": "evret_core.metrics.engine",
    "evaluate_run": "evret_core.metrics.engine",
    "read_qrels": "evret_core.io.trec",
    "read_run": "evret_core.io.trec",
    "write_run": "evret_core.io.trec",
    "EvaluationDataset": "evret_core.io.datasets",
    "JudgmentContext": "evret_core.contracts.judge",
    "QueryExample": "evret_core.io.queries",
    "RetrievalResult": "evret_core.contracts.retrieve",
    "list_plugins": "evret_core.plugins.loading",
    "create_evaluator": "evret_core.plugins.registry",
    "create_executor": "evret_core.plugins.registry",
    "create_judge": "evret_core.plugins.registry",
    "create_llm_provider": "evret_core.plugins.registry",
    "create_metric": "evret_core.plugins.registry",
    "create_retrieval_evaluator": "evret_core.plugins.registry",
    "create_retriever": "evret_core.plugins.registry",
    "EvaluationResults": "evret_core.results.evaluation",
    "QueryResult": "evret_core.results.evaluation",
    "Retriever": "evret_core.contracts.retrieve",
    "EvaluateConfig": "evret_core.evaluation.config",
    "compare": "evret_core.report.api",
    "make_report": "evret_core.report.api",
    "report_data": "evret_core.report.api",
    "write_report": "evret_core.report.api",
    "Comparison": "evret_core.statistics.inference",
    "PairComparison": "evret_core.statistics.inference",
}

__all__ = [
    "AveragePrecision",
    "Comparison",
    "ContainsJudge",
    "Criteria",
    "CriteriaOption",
    "DirectJudge",
    "EvaluateConfig",
    "EvaluationDataset",
    "EvaluationResults",
    "Evaluator",
    "Executor",
    "EvretError",
    "ExactJudge",
    "HitRate",
    "Judge",
    "JudgmentContext",
    "LLMJudge",
    "MRR",
    "Metric",
    "MultiCriteria",
    "MultiCriteriaItem",
    "NDCG",
    "PairComparison",
    "PairwiseJudge",
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
    "create_retrieval_evaluator",
    "create_retriever",
    "evaluate_rankings",
    "evaluate_run",
    "hookimpl",
    "compare",
    "list_plugins",
    "make_report",
    "read_qrels",
    "read_run",
    "report_data",
    "write_report",
    "write_run",
]


def __getattr__(name: str) -> Any:
    # ``evret_core.metrics`` and the like, as after an eager import of the package
    if name not in _EXPORTS and not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        return importlib.import_module(f"{__name__}.{name}")
    return lazy_export(globals(), _EXPORTS, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from evret_core.contracts.errors import EvretError, PluginError, UnknownNameError
    from evret_core.contracts.executor import Executor
    from evret_core.contracts.hooks import hookimpl
    from evret_core.contracts.judge import Judge, JudgmentContext
    from evret_core.contracts.metric import Metric, RankedBatch
    from evret_core.contracts.retrieve import RetrievalResult, Retriever
    from evret_core.criteria import (
        Criteria,
        CriteriaOption,
        DirectJudge,
        MultiCriteria,
        MultiCriteriaItem,
        PairwiseJudge,
    )
    from evret_core.evaluation.config import EvaluateConfig
    from evret_core.evaluation.evaluator import Evaluator
    from evret_core.io.datasets import EvaluationDataset
    from evret_core.io.queries import QueryExample
    from evret_core.io.trec import read_qrels, read_run, write_run
    from evret_core.judge import ContainsJudge, ExactJudge, RegexJudge, TokenOverlapJudge
    from evret_core.judge.llm import LLMJudge
    from evret_core.metrics import MRR, NDCG, AveragePrecision, HitRate, Precision, Recall
    from evret_core.metrics.engine import evaluate_rankings, evaluate_run
    from evret_core.plugins.loading import list_plugins
    from evret_core.plugins.registry import (
        create_evaluator,
        create_executor,
        create_judge,
        create_llm_provider,
        create_metric,
        create_retrieval_evaluator,
        create_retriever,
    )
    from evret_core.report.api import compare, make_report, report_data, write_report
    from evret_core.results.evaluation import EvaluationResults, QueryResult
    from evret_core.statistics.inference import Comparison, PairComparison
