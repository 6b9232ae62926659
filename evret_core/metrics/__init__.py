"""Stage 5, metrics: IR metrics with trec_eval semantics and the vectorised engine."""

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

__all__ = [
    "Precision", "Recall", "F1", "MRR", "NDCG", "HitRate", "AveragePrecision",
    "RPrecision", "Bpref", "ERR", "RBP", "RBPResidual", "NumRelRet", "NumRel", "NumRet",
    "evaluate_run", "evaluate_rankings",
]
