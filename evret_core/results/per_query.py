"""Per-query detail: the :class:`QueryResult` and :class:`Judgment` models, and :class:`QueryTable`, the columnar
store the evaluator fills, which builds a query's models only when that query is asked for.

An evaluation of 100,000 queries x 100 retrieved documents holds ten million judgments; as pydantic models that is
gigabytes and most of the run time. The table keeps what it needs as columns (the retrieved rows, the judge's
verdicts per text-labelled query, one score array per metric) and makes ``results.per_query["q1"]`` on demand;
iterating it builds one query at a time, and writing results streams the same records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from evret_core.assign import Assignment
from evret_core.data.models import QueryExample
from evret_core.retrieve.retrievers import RankedColumns

__all__ = ["Judgment", "QueryResult", "QueryTable", "TextJudgments"]


class Judgment(BaseModel):
    """What the judge said about one retrieved document of a query.

    ``matched`` lists the indexes of the expected answers it matched; ``unmeasured`` those whose judgment could not
    be made (e.g. an LLM call that failed after every retry). ``assigned`` is the id the document scored as.
    """

    rank: int
    doc_id: str
    score: float | None = None
    text: str | None = None
    matched: list[int] = Field(default_factory=list)
    unmeasured: list[int] = Field(default_factory=list)
    assigned: str | None = None


class QueryResult(BaseModel):
    """One query's scores and the evidence behind them."""

    query_id: str
    query_text: str
    scores: dict[str, float]
    retrieved_ids: list[str]
    relevant_ids: dict[str, float] = Field(default_factory=dict)
    judgments: list[Judgment] = Field(default_factory=list)
    expected_answers: list[str] = Field(default_factory=list)
    tags: dict[str, str] = Field(default_factory=dict)
    labelled_by: str = "text"
    unmeasured: int = 0

    @property
    def ranking(self) -> list[str]:
        """The ids the retrieved documents scored as, by rank (judged ids for text-labelled queries)."""
        return [j.assigned if j.assigned is not None else j.doc_id for j in self.judgments]

    @property
    def gains(self) -> list[float]:
        """The relevance grade scored at each rank (0 when not relevant; a repeated id counts once)."""
        seen: set[str] = set()
        out: list[float] = []
        for doc in self.ranking:
            out.append(0.0 if doc in seen else float(self.relevant_ids.get(doc, 0.0)))
            seen.add(doc)
        return out


@dataclass
class TextJudgments:
    """A text-labelled query's verdicts by rank: the answers each document matched, those it could not be judged
    against, and the ids they were assigned."""

    matched: list[list[int]]
    missing: list[list[int]]
    assignment: Assignment

    @property
    def unmeasured(self) -> int:
        return sum(map(len, self.missing))


class QueryTable(Mapping[str, QueryResult]):
    """query id -> :class:`QueryResult`, built on each lookup from columns (not cached: ask once and keep it).

    ``row(i)`` gives query ``i``'s retrieved rows, ``scores`` each metric's per-query values, ``text`` the
    judgments of the text-labelled queries by row index.
    """

    def __init__(
        self,
        queries: Sequence[QueryExample],
        row: Callable[[int], RankedColumns],
        scores: Mapping[str, np.ndarray],
        text: Mapping[int, TextJudgments],
    ) -> None:
        self.queries = queries
        self._row = row
        self.scores = dict(scores)
        self.text = text
        self._index: dict[str, int] | None = None

    # -- Mapping -------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[str]:
        return (q.query_id for q in self.queries)

    def __contains__(self, query_id: object) -> bool:
        return query_id in self.index

    def __getitem__(self, query_id: str) -> QueryResult:
        return QueryResult.model_validate(self.record(self.index[query_id]))

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {q.query_id: i for i, q in enumerate(self.queries)}
        return self._index

    # -- columns -------------------------------------------------------------------------------------------------
    def score_columns(self) -> dict[str, np.ndarray]:
        """metric -> per-query values, in query order."""
        return self.scores

    def tags(self) -> list[dict[str, str]]:
        return [q.tags for q in self.queries]

    def record(self, i: int) -> dict[str, Any]:
        """Query ``i`` as the plain data of a :class:`QueryResult` (what the results file holds)."""
        example = self.queries[i]
        ranked = self._row(i)
        ids = [str(d) for d in ranked.ids]
        scores = ranked.scores.tolist() if isinstance(ranked.scores, np.ndarray) else [float(s) for s in ranked.scores]
        texts = list(ranked.texts) if ranked.texts is not None else [None] * len(ids)
        judged = self.text.get(i)
        if judged is None:
            judgments = [{"rank": r, "doc_id": d, "score": s, "text": t, "matched": [], "unmeasured": [],
                          "assigned": d} for r, (d, s, t) in enumerate(zip(ids, scores, texts, strict=True), 1)]
            relevant = example.relevance
        else:
            judgments = [{"rank": r, "doc_id": d, "score": s, "text": t, "matched": m, "unmeasured": u, "assigned": a}
                         for r, (d, s, t, m, u, a) in enumerate(zip(ids, scores, texts, judged.matched, judged.missing,
                                                                     judged.assignment.assigned, strict=True), 1)]
            relevant = judged.assignment.relevance
        return {
            "query_id": example.query_id,
            "query_text": example.query_text,
            "scores": {name: float(values[i]) for name, values in self.scores.items()},
            "retrieved_ids": ids,
            "relevant_ids": relevant,
            "judgments": judgments,
            "expected_answers": list(example.expected_answers),
            "tags": dict(example.tags),
            "labelled_by": "ids" if example.is_id_labelled else "text",
            "unmeasured": 0 if judged is None else judged.unmeasured,
        }

    def records(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(query id, record) for every query, one at a time."""
        for i, example in enumerate(self.queries):
            yield example.query_id, self.record(i)
