"""Evret: evaluate RAG retrieval against expected answer texts, with trec_eval-exact IR metrics.

The public API is re-exported here and loaded lazily (PEP 562 module ``__getattr__``): ``import evret_core``
imports no submodule but ``version``, so numpy, pydantic and the judges load on the first use of a name that needs
them, and ``evret --help`` and ``evret plugins`` stay fast. The names are written once, in the ``TYPE_CHECKING``
block below (what type checkers and IDEs see); ``__getattr__`` reads the module of each name from that block, and
``__all__`` is the same names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from evret_core.version import __version__ as __version__

if TYPE_CHECKING:  # the public API, the one list: each name is read from here by __getattr__ and __all__
    from evret_core.contracts.errors import EvretError as EvretError
    from evret_core.contracts.errors import PluginError as PluginError
    from evret_core.contracts.errors import UnknownNameError as UnknownNameError
    from evret_core.contracts.executor import Executor as Executor
    from evret_core.contracts.hooks import hookimpl as hookimpl
    from evret_core.contracts.judge import Judge as Judge
    from evret_core.contracts.judge import JudgmentContext as JudgmentContext
    from evret_core.contracts.metric import Metric as Metric
    from evret_core.contracts.metric import RankedBatch as RankedBatch
    from evret_core.contracts.retrieve import RetrievalResult as RetrievalResult
    from evret_core.contracts.retrieve import Retriever as Retriever
    from evret_core.criteria import Criteria as Criteria
    from evret_core.criteria import CriteriaOption as CriteriaOption
    from evret_core.criteria import DirectJudge as DirectJudge
    from evret_core.criteria import MultiCriteria as MultiCriteria
    from evret_core.criteria import MultiCriteriaItem as MultiCriteriaItem
    from evret_core.criteria import PairwiseJudge as PairwiseJudge
    from evret_core.evaluation.config import EvaluateConfig as EvaluateConfig
    from evret_core.evaluation.evaluator import Evaluator as Evaluator
    from evret_core.io.datasets import EvaluationDataset as EvaluationDataset
    from evret_core.io.queries import QueryExample as QueryExample
    from evret_core.io.trec import read_qrels as read_qrels
    from evret_core.io.trec import read_run as read_run
    from evret_core.io.trec import write_run as write_run
    from evret_core.judge import ContainsJudge as ContainsJudge
    from evret_core.judge import ExactJudge as ExactJudge
    from evret_core.judge import RegexJudge as RegexJudge
    from evret_core.judge import TokenOverlapJudge as TokenOverlapJudge
    from evret_core.judge.llm import LLMJudge as LLMJudge
    from evret_core.metrics import MRR as MRR
    from evret_core.metrics import NDCG as NDCG
    from evret_core.metrics import AveragePrecision as AveragePrecision
    from evret_core.metrics import HitRate as HitRate
    from evret_core.metrics import Precision as Precision
    from evret_core.metrics import Recall as Recall
    from evret_core.metrics.engine import evaluate_rankings as evaluate_rankings
    from evret_core.metrics.engine import evaluate_run as evaluate_run
    from evret_core.plugins.loading import list_plugins as list_plugins
    from evret_core.plugins.registry import create_evaluator as create_evaluator
    from evret_core.plugins.registry import create_executor as create_executor
    from evret_core.plugins.registry import create_judge as create_judge
    from evret_core.plugins.registry import create_llm_provider as create_llm_provider
    from evret_core.plugins.registry import create_metric as create_metric
    from evret_core.plugins.registry import create_retrieval_evaluator as create_retrieval_evaluator
    from evret_core.plugins.registry import create_retriever as create_retriever
    from evret_core.report.api import compare as compare
    from evret_core.report.api import make_report as make_report
    from evret_core.report.api import report_data as report_data
    from evret_core.report.api import write_report as write_report
    from evret_core.results.evaluation import EvaluationResults as EvaluationResults
    from evret_core.results.evaluation import QueryResult as QueryResult
    from evret_core.statistics.inference import Comparison as Comparison
    from evret_core.statistics.inference import PairComparison as PairComparison


_PUBLIC: dict[str, str] = {}


def _public() -> dict[str, str]:
    """Public name -> the module that defines it, read once from the imports of the ``TYPE_CHECKING`` block above
    (in this file's code: compiled from the source or, where only bytecode is installed, read from it)."""
    if not _PUBLIC:
        import dis
        import marshal

        with open(__file__, "rb") as file:
            data = file.read()
        code = marshal.loads(data[16:]) if __file__.endswith(".pyc") else compile(data, __file__, "exec")
        module = ""
        for instruction in dis.get_instructions(code):
            if instruction.opname == "IMPORT_NAME":
                module = instruction.argval
            elif instruction.opname == "IMPORT_FROM" and module.startswith(f"{__name__}.") and module != _VERSION:
                _PUBLIC[instruction.argval] = module
    return _PUBLIC


_VERSION = f"{__name__}.version"


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use; ``__all__``, the public names; a submodule
    (``evret_core.metrics``), as after an eager import of the package."""
    if name == "__all__":
        return sorted(_public())
    module = _public().get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_public()})
