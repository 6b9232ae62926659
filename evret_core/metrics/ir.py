"""The standard IR measures, with trec_eval's semantics, vectorised over queries."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.contracts.metric import Metric, RankedBatch, cut, safe_divide

UNIT = (0.0, 1.0)
# a count is an exact integer in a float64
COUNT_RANGE = (0.0, float(2**53))


def _discounts(depth: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))


def _ranks(depth: int) -> np.ndarray:
    return np.arange(1, depth + 1, dtype=np.float64)


class Precision(Metric):
    """precision@k (trec_eval P_k): relevant documents in the top k, divided by k even when fewer were retrieved.

    Without a cutoff (trec_eval set_P): relevant retrieved over all retrieved.
    """

    family = "precision"
    value_range = UNIT
    trec_name = "set_P"
    trec_name_k = "P_{k}"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        if self.k is None:
            return safe_divide(batch.num_rel_ret, batch.num_ret)
        return np.asarray(cut(batch.relevant, self.k).sum(axis=1) / float(self.k), dtype=np.float64)


class Recall(Metric):
    """recall@k (trec_eval recall_k): relevant documents in the top k over all relevant documents (set_recall without k).

    On queries with answer coverage (``any_match``), expected answers found over expected answers
    (:meth:`RankedBatch.recall_counts`).
    """

    family = "recall"
    value_range = UNIT
    trec_name = "set_recall"
    trec_name_k = "recall_{k}"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return safe_divide(*batch.recall_counts(self.k))


class F1(Metric):
    """f1@k: harmonic mean of precision@k and recall@k; without a cutoff, of set_P and set_recall (trec_eval set_F)."""

    family = "f1"
    value_range = UNIT
    trec_name = "set_F"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        p = Precision(self.k).compute(batch)
        r = Recall(self.k).compute(batch)
        return safe_divide(2.0 * p * r, p + r)


class HitRate(Metric):
    """hit_rate@k (trec_eval success_k): 1 when any relevant document is in the top k."""

    family = "hit_rate"
    value_range = UNIT
    trec_name_k = "success_{k}"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return np.asarray(cut(batch.relevant, self.k).any(axis=1), dtype=np.float64)


class MRR(Metric):
    """mrr@k: reciprocal rank of the first relevant document, 0 when it is below k (``mrr``: trec_eval recip_rank)."""

    family = "mrr"
    value_range = UNIT
    trec_name = "recip_rank"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        rel = cut(batch.relevant, self.k)
        if rel.shape[1] == 0:
            return np.zeros(batch.n_queries)
        first = rel.argmax(axis=1)
        found = rel.any(axis=1)
        return np.where(found, 1.0 / (first + 1.0), 0.0)


class NDCG(Metric):
    """ndcg@k (trec_eval ndcg_cut_k; ``ndcg``: trec_eval ndcg): the judged grade as linear gain, discounted by
    log2(rank + 1), over the ideal ordering of all positively judged documents. ``gain="exponential"``: 2^g - 1.
    """

    family = "ndcg"
    value_range = UNIT
    trec_name: str | None = "ndcg"
    trec_name_k: str | None = "ndcg_cut_{k}"

    def __init__(self, k: int | None = None, gain: str = "linear") -> None:
        super().__init__(k)
        if gain not in ("linear", "exponential"):
            raise EvretError(f"metric ndcg: gain must be 'linear' or 'exponential', got {gain!r}")
        self.gain = gain
        if gain != "linear":
            self.trec_name = self.trec_name_k = None

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "gain": self.gain}

    def name_options(self) -> dict[str, Any]:
        return {} if self.gain == "linear" else {"gain": self.gain}

    def _g(self, grades: np.ndarray) -> np.ndarray:
        return np.power(2.0, grades) - 1.0 if self.gain == "exponential" else grades

    def compute(self, batch: RankedBatch) -> np.ndarray:
        gains = self._g(cut(batch.gains, self.k))
        ideal = self._g(cut(batch.ideal, self.k))
        dcg = gains @ _discounts(gains.shape[1])
        idcg = ideal @ _discounts(ideal.shape[1])
        return safe_divide(dcg, idcg)


class AveragePrecision(Metric):
    """ap@k (trec_eval map_cut_k; ``ap``: map): sum of precision at each relevant rank <= k, over all relevant docs."""

    family = "ap"
    value_range = UNIT
    trec_name = "map"
    trec_name_k = "map_cut_{k}"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        # sparse: only the relevant ranks are visited (a handful per query, not the whole depth)
        rows, cols = np.nonzero(cut(batch.relevant, self.k))
        if rows.size == 0:
            return np.zeros(batch.n_queries)
        found = np.arange(1, rows.size + 1) - np.searchsorted(rows, rows, side="left")
        total = np.bincount(rows, weights=found / (cols + 1.0), minlength=batch.n_queries)
        return safe_divide(total, batch.num_rel)


class RPrecision(Metric):
    """r_precision (trec_eval Rprec): precision at rank R, R being the number of relevant documents."""

    family = "r_precision"
    value_range = UNIT
    allows_k = False
    trec_name = "Rprec"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        if batch.depth == 0:
            return np.zeros(batch.n_queries)
        found = np.cumsum(batch.relevant, axis=1)
        at = np.clip(batch.num_rel, 1, batch.depth) - 1
        in_top_r = np.take_along_axis(found, at[:, None], axis=1)[:, 0]
        return safe_divide(np.where(batch.num_rel > 0, in_top_r, 0), batch.num_rel)


class Bpref(Metric):
    """bpref (trec_eval bpref): for each retrieved relevant document, 1 - min(n, R) / min(R, N) where n counts
    the judged non-relevant documents ranked above it; summed and divided by R (R relevant, N judged non-relevant).
    Unjudged documents are ignored, and so are documents judged with a negative grade (trec_eval's -1, "in the pool
    but unjudged", and -2, "not in the pool"; any negative grade counts as neither relevant nor non-relevant here).
    """

    family = "bpref"
    value_range = UNIT
    allows_k = False
    trec_name = "bpref"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        if batch.depth == 0:
            return np.zeros(batch.n_queries)
        nonrel_above = np.cumsum(batch.judged_nonrel, axis=1)
        r = batch.num_rel[:, None]
        denominator = np.minimum(batch.num_rel, batch.num_nonrel)[:, None]
        penalty = safe_divide(np.minimum(nonrel_above, r), np.broadcast_to(denominator, nonrel_above.shape))
        per_rank = np.where(batch.relevant, 1.0 - penalty, 0.0)
        return safe_divide(per_rank.sum(axis=1), batch.num_rel)


class ERR(Metric):
    """err@k, expected reciprocal rank (Chapelle et al., 2009): the user stops at rank r with probability
    R_r = (2^g - 1) / 2^g_max; ERR = sum_r R_r / r * prod_{i<r} (1 - R_i). Not a trec_eval measure.

    ``max_grade`` defaults to the highest grade judged over the whole evaluation: every judgment given to it
    (all the qrels, including queries the run lacks; for the evaluator, every query of the dataset), floored at
    0, 1 when there is none. Each entry point (``evaluate_run``, ``evaluate_rankings``, the evaluator,
    ``evaluate_run_file``) resolves it once before chunking, through
    :func:`~evret_core.metrics.engine.resolve_judged_defaults`, into ``judged_max`` of a copy that keeps the name
    ``err@k``. ``compute`` on an unresolved metric takes the batch as the whole evaluation. A grade above an
    explicit ``max_grade`` counts as ``max_grade``.
    """

    family = "err"
    value_range = UNIT

    def __init__(self, k: int | None = None, max_grade: float | None = None) -> None:
        super().__init__(k)
        self.max_grade = max_grade
        #: the default of ``max_grade`` resolved over the whole evaluation (see :meth:`with_judged_max`)
        self.judged_max: float | None = None

    @property
    def needs_judged_max(self) -> bool:
        return self.max_grade is None and self.judged_max is None

    def with_judged_max(self, judged_max: float) -> ERR:
        if not self.needs_judged_max:
            return self
        resolved = copy.copy(self)
        resolved.judged_max = float(judged_max)
        return resolved

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "max_grade": self.max_grade}

    def name_options(self) -> dict[str, Any]:
        return {} if self.max_grade is None else {"max_grade": f"{self.max_grade:g}"}

    def compute(self, batch: RankedBatch) -> np.ndarray:
        gains = np.where(cut(batch.relevant, self.k), cut(batch.gains, self.k), 0.0)
        if gains.shape[1] == 0:
            return np.zeros(batch.n_queries)
        top = self.max_grade if self.max_grade is not None else self.judged_max
        if top is None:
            top = float(batch.ideal.max()) if batch.ideal.size else 1.0
        if top <= 0:
            return np.zeros(batch.n_queries)
        # a grade above an explicit max_grade counts as max_grade (per document: never depends on the chunk)
        gains = np.minimum(gains, top)
        stop = (np.power(2.0, gains) - 1.0) / 2.0**top
        reach = np.cumprod(1.0 - stop, axis=1)
        reach = np.concatenate([np.ones((gains.shape[0], 1)), reach[:, :-1]], axis=1)
        return np.asarray((stop * reach / _ranks(gains.shape[1])).sum(axis=1), dtype=np.float64)


class RBP(Metric):
    """rbp, rank-biased precision (Moffat & Zobel, 2008): (1 - p) * sum_r gain_r * p^(r-1) over the whole ranking,
    persistence ``p`` = 0.9 as in trec_eval. As trec_eval does, the gain is the grade, scaled to [0, 1] by the
    query's highest judged grade when that exceeds 1, and the relevance level plays no part.
    """

    family = "rbp"
    value_range = UNIT
    allows_k = False
    trec_name: str | None = "rbp"
    default_p = 0.9

    def __init__(self, k: int | None = None, p: float = 0.9) -> None:
        super().__init__(k)
        if not 0.0 < float(p) < 1.0:
            raise EvretError(f"metric {self.family}: persistence p must be in (0, 1), got {p!r}")
        self.p = float(p)
        if self.p != self.default_p:
            self.trec_name = None

    def name_options(self) -> dict[str, Any]:
        return {} if self.p == self.default_p else {"p": f"{self.p:g}"}

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "p": self.p}

    def _weights(self, depth: int) -> np.ndarray:
        return np.power(self.p, np.arange(depth, dtype=np.float64))

    def compute(self, batch: RankedBatch) -> np.ndarray:
        top = batch.ideal[:, :1].max(axis=1, initial=0.0) if batch.ideal.shape[1] else np.zeros(batch.n_queries)
        scale = np.where(top > 1.0, top, 1.0)
        return np.asarray((1.0 - self.p) * (batch.gains @ self._weights(batch.depth)) / scale, dtype=np.float64)


class RBPResidual(RBP):
    """rbp_residual (trec_eval rbp_resid): how much rbp could still grow if unjudged documents were relevant:
    (1 - p) * sum over unjudged ranks of p^(r-1), plus p^num_ret for the ranks past the end. As in trec_eval it
    is 0 when every retrieved document is judged.
    """

    family = "rbp_residual"
    trec_name = "rbp_resid"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        depth = batch.depth
        inside = np.arange(depth) < batch.num_ret[:, None]
        with np.errstate(invalid="ignore"):
            unjudged = (np.isnan(batch.grades) | (batch.grades < 0)) & inside
        tail = np.power(self.p, batch.num_ret.astype(np.float64))
        value = (1.0 - self.p) * (unjudged @ self._weights(depth)) + tail
        return np.where(unjudged.any(axis=1), value, 0.0)


class Judged(Metric):
    """judged@k (ir_measures Judged@k): the share of the top k documents that have a judgment in the qrels, any
    grade (a negative one too), over min(k, documents retrieved); 0 when nothing was retrieved."""

    family = "judged"
    value_range = UNIT
    requires_k = True

    def compute(self, batch: RankedBatch) -> np.ndarray:
        assert self.k is not None  # requires_k
        judged = cut(~np.isnan(batch.grades), self.k).sum(axis=1)
        return safe_divide(judged, np.minimum(batch.num_ret, self.k))


class Unjudged(Metric):
    """unjudged@k (trec_eval 10.0 unj_k): the top k documents that are not in the qrels or are judged with a
    negative grade (trec_eval's "unjudged in the pool"), divided by k; ranks past the end of the ranking count as
    judged, so a run of 15 documents with 4 unjudged has unjudged@20 = 4/20."""

    family = "unjudged"
    value_range = UNIT
    requires_k = True
    higher_is_better = False
    trec_name_k = "unj_{k}"

    def compute(self, batch: RankedBatch) -> np.ndarray:
        assert self.k is not None  # requires_k
        return np.asarray(cut(unjudged_ranks(batch), self.k).sum(axis=1) / float(self.k), dtype=np.float64)


#: ``evret trec`` and ``evret evaluate`` (with qrels) warn when the mean unjudged@10 is above this share
UNJUDGED_WARNING_K = 10
UNJUDGED_WARNING_SHARE = 0.5


def unjudged_warning(mean_unjudged: float, queries: int, grades: Callable[[], Iterable[float]]) -> str | None:
    """The warning for a run whose top ``UNJUDGED_WARNING_K`` is mostly unjudged (mean unjudged@10 above
    ``UNJUDGED_WARNING_SHARE``), or None. None too when the qrels judge no document non-relevant (every grade of
    ``grades()`` > 0: qrels that list only relevant documents, as BEIR's, call everything else non-relevant)."""
    if not mean_unjudged > UNJUDGED_WARNING_SHARE or all(g > 0 for g in grades()):
        return None
    k = UNJUDGED_WARNING_K
    return (f"warning: {mean_unjudged:.0%} of the run's top {k} documents are unjudged (unjudged@{k}, trec_eval's "
            f"unj_{k}, over {queries} queries): they count as non-relevant, so the scores may understate the run; "
            f"judged@{k} and the condensed measures (ndcg_condensed@{k}...) show how much")


def unjudged_ranks(batch: RankedBatch) -> np.ndarray:
    """True at each retrieved rank whose document trec_eval counts as unjudged: not in the qrels, or a negative
    grade."""
    inside = np.arange(batch.depth) < batch.num_ret[:, None]
    with np.errstate(invalid="ignore"):
        return np.asarray((np.isnan(batch.grades) | (batch.grades < 0)) & inside)


def condense(batch: RankedBatch) -> RankedBatch:
    """The batch with every unjudged document (see :func:`unjudged_ranks`) removed from each ranking and the rest
    moved up in order, ``num_ret`` the judged documents retrieved: trec_eval -J's "judged documents only"."""
    if batch.depth == 0:
        return batch
    keep = ~unjudged_ranks(batch) & (np.arange(batch.depth) < batch.num_ret[:, None])
    order = np.argsort(~keep, axis=1, kind="stable")
    grades = np.take_along_axis(batch.grades, order, axis=1)
    grades[~np.take_along_axis(keep, order, axis=1)] = np.nan
    condensed = RankedBatch(grades, batch.qrel_grades, keep.sum(axis=1), batch.relevance_level)
    if batch.answers_found is not None and batch.num_answers is not None:
        found = np.take_along_axis(batch.answers_found, order, axis=1)
        found[~np.take_along_axis(keep, order, axis=1)] = 0.0
        condensed.set_answer_coverage(found, batch.num_answers)
    return condensed


class _Condensed(Metric):
    """A measure on the condensed ranking (:func:`condense`): unjudged documents removed before scoring, as
    trec_eval -J computes every measure. It reads the whole ranking (a judged document below rank k may move up)."""

    @property
    def trec_eval_name(self) -> str | None:
        """None: trec_eval prints these under the plain measure's name, only with -J."""
        return None

    @property
    def depth(self) -> int | None:
        return None

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return super().compute(condense(batch))


class PrecisionCondensed(_Condensed, Precision):
    """precision_condensed@k: precision@k on the condensed ranking (trec_eval -J P_k)."""

    family = "precision_condensed"


class RecallCondensed(_Condensed, Recall):
    """recall_condensed@k: recall@k on the condensed ranking (trec_eval -J recall_k)."""

    family = "recall_condensed"


class MRRCondensed(_Condensed, MRR):
    """mrr_condensed: mrr on the condensed ranking (trec_eval -J recip_rank)."""

    family = "mrr_condensed"


class NDCGCondensed(_Condensed, NDCG):
    """ndcg_condensed@k: ndcg@k on the condensed ranking (trec_eval -J ndcg_cut_k; without k, -J ndcg), the
    condensed-list nDCG' of Sakai (2007)."""

    family = "ndcg_condensed"



class AveragePrecisionCondensed(_Condensed, AveragePrecision):
    """ap_condensed@k: ap@k on the condensed ranking (trec_eval -J map_cut_k; without k, -J map), Sakai's AP'."""

    family = "ap_condensed"


class _Count(Metric):
    allows_k = False
    value_range = COUNT_RANGE

    def compute(self, batch: RankedBatch) -> np.ndarray:
        return np.asarray(getattr(batch, self.family), dtype=np.float64)


class NumRelRet(_Count):
    """num_rel_ret: relevant documents retrieved."""

    family = "num_rel_ret"
    trec_name = "num_rel_ret"


class NumRel(_Count):
    """num_rel: relevant documents judged for the query."""

    family = "num_rel"
    trec_name = "num_rel"


class NumRet(_Count):
    """num_ret: documents retrieved (the whole ranking)."""

    family = "num_ret"
    trec_name = "num_ret"


ALL_METRICS: dict[str, type[Metric]] = {
    cls.family: cls
    for cls in (
        Precision, Recall, F1, HitRate, MRR, NDCG, AveragePrecision, RPrecision, Bpref, ERR, RBP, RBPResidual,
        NumRelRet, NumRel, NumRet, Judged, Unjudged, PrecisionCondensed, RecallCondensed, MRRCondensed,
        NDCGCondensed, AveragePrecisionCondensed,
    )
}
