"""Stage 5, metrics: IR metrics with trec_eval semantics, the vectorised engine, and TREC file readers and writers."""

from evret_core.metrics.engine import evaluate_rankings, evaluate_run
from evret_core.metrics.ir import (
    ERR,
    F1,
    MRR,
    NDCG,
    RBP,
    AveragePrecision,
    Bpref,
    HitRate,
    NumRel,
    NumRelRet,
    NumRet,
    Precision,
    RBPResidual,
    Recall,
    RPrecision,
)
from evret_core.metrics.metric import Metric, RankedBatch
from evret_core.metrics.runcolumns import ColumnarRun, read_run_columns
from evret_core.metrics.trec import read_qrels, read_run, write_run

__all__ = [
    "Metric", "RankedBatch", "Precision", "Recall", "F1", "MRR", "NDCG", "HitRate", "AveragePrecision",
    "RPrecision", "Bpref", "ERR", "RBP", "RBPResidual", "NumRelRet", "NumRel", "NumRet",
    "evaluate_run", "evaluate_rankings", "read_qrels", "read_run", "write_run", "read_run_columns", "ColumnarRun",
]
