"""The standard IR measures, with trec_eval's semantics, vectorised over queries."""

from __future__ import annotations

import numpy as np

from evret_core.metrics.base import Metric, RankedBatch, cut, safe_divide


def _discounts(depth: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))


class Precision(Metric):
    """precision@k (trec_eval P_k): relevant documents in the top k, divided by k."""

    family = "precision"
    requires_k = True

    def compute(self, batch: RankedBatch) -> np.ndarray:
        assert self.k is not None
        return cut(batch.relevant, self.k).sum(axis=1) / float(self.k)


class Recall(Metric):
    """recall@k (trec_eval recall_k): relevant documents in the top k over all relevant documents."""

    family = "recall"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return safe_divide(cut(batch.relevant, self.k).sum(axis=1), batch.num_rel)


class HitRate(Metric):
    """hit_rate@k (trec_eval success_k): 1 when any relevant document is in the top k."""

    family = "hit_rate"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return cut(batch.relevant, self.k).any(axis=1).astype(np.float64)


class MRR(Metric):
    """mrr@k: reciprocal rank of the first relevant document, 0 when it is below k (``mrr``: no cutoff)."""

    family = "mrr"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        rel = cut(batch.relevant, self.k)
        if rel.shape[1] == 0:
            return np.zeros(batch.n_queries)
        first = rel.argmax(axis=1)
        found = rel.any(axis=1)
        return np.where(found, 1.0 / (first + 1.0), 0.0)


class NDCG(Metric):
    """ndcg@k (trec_eval ndcg_cut_k): grade as linear gain, log2(rank + 1) discount, ideal over all relevant docs.

    ``gain="exponential"`` uses 2^grade - 1 instead.
    """

    family = "ndcg"

    def __init__(self, k: int | None = None, gain: str = "linear") -> None:
        super().__init__(k)
        if gain not in ("linear", "exponential"):
            from evret_core.errors import EvretError

            raise EvretError(f"metric ndcg: gain must be 'linear' or 'exponential', got {gain!r}")
        self.gain = gain

    def config(self) -> dict[str, object]:
        return {"name": self.name, "gain": self.gain}

    def _g(self, grades: np.ndarray) -> np.ndarray:
        return np.power(2.0, grades) - 1.0 if self.gain == "exponential" else grades

    def compute(self, batch: RankedBatch) -> np.ndarray:
        gains = self._g(cut(batch.gains, self.k))
        ideal = self._g(cut(batch.ideal, self.k))
        dcg = gains @ _discounts(gains.shape[1]) if gains.shape[1] else np.zeros(batch.n_queries)
        idcg = ideal @ _discounts(ideal.shape[1]) if ideal.shape[1] else np.zeros(batch.n_queries)
        return safe_divide(dcg, idcg)


class AveragePrecision(Metric):
    """ap@k (trec_eval map_cut_k): sum of precision at each relevant rank <= k, over all relevant documents."""

    family = "ap"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        rel = cut(batch.relevant, self.k).astype(np.float64)
        if rel.shape[1] == 0:
            return np.zeros(batch.n_queries)
        ranks = np.arange(1, rel.shape[1] + 1, dtype=np.float64)
        precision_at = np.cumsum(rel, axis=1) / ranks
        return safe_divide((precision_at * rel).sum(axis=1), batch.num_rel)
