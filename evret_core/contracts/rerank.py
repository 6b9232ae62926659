"""The reranker contract: a :class:`Reranker` takes one query's candidate list (ids, texts and first-stage scores,
as :class:`~evret_core.contracts.retrieve.RankedColumns` or :class:`~evret_core.contracts.retrieve.RetrievalResult`
objects) and returns the same candidates re-scored with its own score and re-ordered by it, best first, cut to
``k``.

A reranker implements :meth:`Reranker.score` (one query) or :meth:`Reranker.batch_score` (many queries at once:
override it when scoring many pairs together is cheaper); the base does the rest once for every reranker: it checks
the candidates (distinct ids, a text for each), checks the scores (one finite number per candidate), orders by score
descending with ties kept in the first stage's order (the candidate's position in its list: stable, so the same
input gives the same output), and cuts to ``k``. numpy is imported inside the functions that use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Reranker"]


class Reranker:
    """Re-scores and re-orders a query's candidates.

    Implement :meth:`score` or :meth:`batch_score` (each defaults to the other); call :meth:`rerank` (objects),
    :meth:`batch_rerank` (objects, many queries) or :meth:`batch_rerank_columns` (columns, what the ``rerank``
    retriever calls). The result holds exactly the candidates' ids, none added: all of them when ``k`` is at least
    their number, else the ``k`` best. Ties in the reranker's score keep the first stage's order.
    """

    name: str = "reranker"

    requires_text: bool = True
    """Whether every candidate needs a text (a reranker that scores ids alone sets False)."""

    def score(self, query: str, candidates: RankedColumns) -> Sequence[float] | np.ndarray:
        """One score per candidate of ``query``, in the candidates' order (higher is better)."""
        if type(self).batch_score is Reranker.batch_score:
            raise NotImplementedError(f"{type(self).__name__} implements neither score nor batch_score")
        return self.batch_score([query], [candidates])[0]

    def batch_score(self, queries: Sequence[str],
                    candidates: Sequence[RankedColumns]) -> Sequence[Sequence[float] | np.ndarray]:
        """One score list (or array) per query (``candidates[i]`` are query ``i``'s); the default calls :meth:`score` per
        query."""
        return [self.score(query, columns) for query, columns in zip(queries, candidates, strict=True)]

    def batch_rerank_columns(self, queries: Sequence[str], candidates: Sequence[RankedColumns],
                             k: int) -> list[RankedColumns]:
        """Each query's candidates re-scored and re-ordered, best first, cut to ``k``: ids and texts are the
        candidates', scores the reranker's. Bad candidates (a repeated id, a missing text) are an
        :class:`~evret_core.contracts.errors.EvretError` raised before anything is scored."""
        import numpy as np

        if len(queries) != len(candidates):
            raise EvretError(f"reranker {self.name!r}: {len(queries)} queries and {len(candidates)} candidate lists")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise EvretError(f"reranker {self.name!r}: k must be a positive integer, got {k!r}")
        for query, columns in zip(queries, candidates, strict=True):
            self._check_candidates(query, columns)
        todo = [i for i, columns in enumerate(candidates) if len(columns)]
        scored = self.batch_score([queries[i] for i in todo], [candidates[i] for i in todo]) if todo else []
        if len(scored) != len(todo):
            raise EvretError(f"reranker {self.name!r} returned {len(scored)} score lists for {len(todo)} queries")
        out = [RankedColumns([], np.zeros(0, dtype=np.float64), []) for _ in candidates]
        for i, scores in zip(todo, scored, strict=True):
            columns = candidates[i]
            values = self._checked_scores(queries[i], columns, scores)
            # a stable sort of the negated scores: ties keep the candidates' (the first stage's) order
            order = np.argsort(-values, kind="stable")[:k]
            ids = [str(columns.ids[j]) for j in order]
            texts = None if columns.texts is None else [columns.texts[j] for j in order]
            out[i] = RankedColumns(ids, values[order], texts)
        return out

    def rerank(self, query: str, candidates: Sequence[RetrievalResult], k: int) -> list[RetrievalResult]:
        """``query``'s candidates (objects) re-scored and re-ordered, best first, cut to ``k``; each keeps its
        metadata, its score is the reranker's."""
        return self.batch_rerank([query], [candidates], k)[0]

    def batch_rerank(self, queries: Sequence[str], candidates: Sequence[Sequence[RetrievalResult]],
                     k: int) -> list[list[RetrievalResult]]:
        """:meth:`rerank` for many queries at once (one :meth:`batch_score` call)."""
        columns = [RankedColumns.from_results(list(results)) for results in candidates]
        ranked = self.batch_rerank_columns(queries, columns, k)
        out: list[list[RetrievalResult]] = []
        for results, reranked in zip(candidates, ranked, strict=True):
            by_id = {r.doc_id: r for r in results}
            out.append([RetrievalResult(doc_id=doc_id, score=float(score), metadata=by_id[doc_id].metadata)
                        for doc_id, score in zip(reranked.ids, reranked.scores, strict=True)])
        return out

    def _check_candidates(self, query: str, columns: RankedColumns) -> None:
        ids = [str(d) for d in columns.ids]
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            for repeated in ids:
                if repeated in seen:
                    break
                seen.add(repeated)
            raise EvretError(f"reranker {self.name!r}: query {query[:60]!r} has document {repeated!r} twice among "
                             f"its candidates")
        if self.requires_text and len(ids):
            texts = columns.texts
            missing = next((d for j, d in enumerate(ids) if texts is None or not isinstance(texts[j], str)), None)
            if missing is not None:
                raise EvretError(f"reranker {self.name!r} reads the candidates' texts, and document {missing!r} "
                                 f"of query {query[:60]!r} has none: give the first stage a corpus")

    def _checked_scores(self, query: str, columns: RankedColumns, scores: Sequence[float] | np.ndarray) -> Any:
        import numpy as np

        try:
            values = np.asarray(scores, dtype=np.float64)
        except (TypeError, ValueError):
            raise EvretError(f"reranker {self.name!r}: its scores for query {query[:60]!r} are not numbers") \
                from None
        if values.shape != (len(columns),):
            raise EvretError(f"reranker {self.name!r} returned {values.size} scores for the {len(columns)} "
                             f"candidates of query {query[:60]!r}")
        if not np.isfinite(values).all():
            bad = next(j for j, v in enumerate(values.tolist()) if not math.isfinite(v))
            raise EvretError(f"reranker {self.name!r} scored document {str(columns.ids[bad])!r} of query "
                             f"{query[:60]!r} {values[bad]}: scores must be finite numbers")
        return values

    def config(self) -> dict[str, Any]:
        """Settings that identify this reranker in the results manifest."""
        return {"name": self.name}

    def reset_stats(self) -> None:
        """Start counting afresh (what :meth:`stats` reports)."""

    def stats(self) -> dict[str, Any]:
        """What the reranker did since the last :meth:`reset_stats` (pairs scored, calls, cache hits...)."""
        return {}
