"""IR metrics with trec_eval semantics."""

from evret_core.metrics.base import Metric, RankedBatch
from evret_core.metrics.ir import MRR, NDCG, AveragePrecision, HitRate, Precision, Recall

__all__ = ["Metric", "RankedBatch", "Precision", "Recall", "MRR", "NDCG", "HitRate", "AveragePrecision"]
