"""Metric contract and the array form that every metric is computed on.

Every metric is computed on a :class:`RankedBatch`: for ``n`` queries and a depth ``K``, the grade of the
document at each rank (0 where not relevant), the grades of all relevant documents (for the ideal ranking and
the number of relevant documents), and how many documents each query retrieved. The same arrays serve one
query (``score``) and a whole evaluation (``compute``), so there is one implementation of each formula.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evret_core.errors import EvretError

Relevance = Mapping[str, float] | Iterable[str]


@dataclass
class RankedBatch:
    """Per-query relevance along the ranking, padded to a common depth.

    - ``gains[q, r]``: grade of the document at rank ``r`` (0-based) of query ``q``; 0 when not relevant or
      past the end of the ranking.
    - ``relevant[q, r]``: True when that document counts as relevant (grade >= the relevance level).
    - ``ideal[q, j]``: grades of query ``q``'s relevant documents, sorted descending, 0-padded.
    - ``num_rel[q]``: number of relevant documents of query ``q`` (judged, grade >= the relevance level).
    - ``num_ret[q]``: number of documents query ``q`` retrieved.
    """

    gains: np.ndarray
    relevant: np.ndarray
    ideal: np.ndarray
    num_rel: np.ndarray
    num_ret: np.ndarray

    @property
    def n_queries(self) -> int:
        return int(self.gains.shape[0])

    @property
    def depth(self) -> int:
        return int(self.gains.shape[1])

    @classmethod
    def from_rankings(
        cls,
        rankings: Sequence[Sequence[str]],
        qrels: Sequence[Relevance],
        relevance_level: float | None = None,
    ) -> RankedBatch:
        """Build the arrays from ranked id lists and, per query, relevant ids (a list, or a mapping id -> grade).

        A document is relevant when its grade is > 0, or >= ``relevance_level`` when one is given. A document
        retrieved twice counts once, at its best rank (later copies are not relevant).
        """
        if len(rankings) != len(qrels):
            raise EvretError(f"{len(rankings)} rankings but {len(qrels)} relevance sets")
        grades_per_query = [_as_grades(r) for r in qrels]
        n = len(rankings)
        depth = max((len(r) for r in rankings), default=0)
        max_rel = max((len(g) for g in grades_per_query), default=0)
        gains = np.zeros((n, max(depth, 1)), dtype=np.float64)
        relevant = np.zeros((n, max(depth, 1)), dtype=bool)
        ideal = np.zeros((n, max(max_rel, 1)), dtype=np.float64)
        num_rel = np.zeros(n, dtype=np.int64)
        num_ret = np.zeros(n, dtype=np.int64)
        for q, (ranking, grades) in enumerate(zip(rankings, grades_per_query, strict=True)):
            rel_grades = sorted(
                (g for g in grades.values() if _is_relevant(g, relevance_level)), reverse=True
            )
            num_rel[q] = len(rel_grades)
            ideal[q, : len(rel_grades)] = [max(g, 0.0) for g in rel_grades]
            num_ret[q] = len(ranking)
            seen: set[str] = set()
            for r, doc in enumerate(ranking):
                if doc in seen:
                    continue
                seen.add(doc)
                grade = grades.get(doc)
                if grade is not None and _is_relevant(grade, relevance_level):
                    relevant[q, r] = True
                    gains[q, r] = max(grade, 0.0)
        return cls(gains=gains, relevant=relevant, ideal=ideal, num_rel=num_rel, num_ret=num_ret)


def _is_relevant(grade: float, relevance_level: float | None) -> bool:
    return grade >= relevance_level if relevance_level is not None else grade > 0


def _as_grades(relevant: Relevance) -> dict[str, float]:
    if isinstance(relevant, Mapping):
        return {str(k): float(v) for k, v in relevant.items()}
    return {str(doc): 1.0 for doc in relevant}


class Metric:
    """One IR measure, optionally cut off at rank ``k``; named ``family@k`` (or ``family`` without a cutoff).

    Subclasses set ``family`` and implement :meth:`compute`, vectorised over queries. ``k=None`` means the whole
    ranking for families that allow it; families that need a cutoff set ``requires_k``.
    """

    family: str = "metric"
    requires_k: bool = False
    higher_is_better: bool = True

    def __init__(self, k: int | None = None) -> None:
        if k is not None:
            try:
                k = int(k)
            except (TypeError, ValueError):
                raise EvretError(f"metric {self.family!r}: k must be a positive integer, got {k!r}") from None
            if k <= 0:
                raise EvretError(f"metric {self.family!r}: k must be a positive integer, got {k}")
        elif self.requires_k:
            raise EvretError(f"metric {self.family!r} needs a cutoff: write {self.family}@K, e.g. {self.family}@10")
        self.k = k

    @property
    def name(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"

    @property
    def depth(self) -> int | None:
        """How many retrieved documents the metric reads (None: all of them)."""
        return self.k

    def config(self) -> dict[str, Any]:
        return {"name": self.name}

    def compute(self, batch: RankedBatch) -> np.ndarray:
        """The metric for every query of ``batch``, as a float64 array of length ``batch.n_queries``."""
        raise NotImplementedError

    def score(self, retrieved_ids: Sequence[str], relevant_ids: Relevance) -> float:
        """The metric for one ranked list of ids against relevant ids (a list, or a mapping id -> grade)."""
        batch = RankedBatch.from_rankings([list(retrieved_ids)], [relevant_ids])
        return float(self.compute(batch)[0])

    def __repr__(self) -> str:
        return f"<Metric {self.name}>"


def cut(matrix: np.ndarray, k: int | None) -> np.ndarray:
    """The first ``k`` columns (all when ``k`` is None), zero-padded when the matrix is narrower than ``k``."""
    if k is None:
        return matrix
    if matrix.shape[1] >= k:
        return matrix[:, :k]
    pad = np.zeros((matrix.shape[0], k - matrix.shape[1]), dtype=matrix.dtype)
    return np.concatenate([matrix, pad], axis=1)


def safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0."""
    numerator = np.asarray(numerator, dtype=np.float64)
    denominator = np.asarray(denominator, dtype=np.float64)
    out = np.zeros(np.broadcast(numerator, denominator).shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out
