"""Per-query detail: the :class:`QueryResult` and :class:`Judgment` models, :class:`QueryTable`, the columnar
store the evaluator fills, which builds a query's models only when that query is asked for, and
:class:`QueryColumns`, the per-query numbers of any run as columns (what checks, statistics and comparisons read).

An evaluation of 100,000 queries x 100 retrieved documents holds ten million judgments; as pydantic models that is
gigabytes and most of the run time. The table keeps what it needs as columns (the retrieved rows, the judge's
verdicts per text-labelled query, one score array per metric) and makes ``results.per_query["q1"]`` on demand;
iterating it builds one query at a time, and writing results streams the same records. A results file read back
is held the same way (:class:`~evret_core.results.stored.StoredQueries`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from evret_core.assign import Assignment, answer_coverage
from evret_core.contracts.retrieve import RankedColumns
from evret_core.io.queries import QueryExample

__all__ = ["Judgment", "QueryColumns", "QueryResult", "QueryTable", "RankColumns", "TextJudgments",
           "query_columns"]


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
        self._ranks: RankColumns | None = None

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

    @property
    def ranks(self) -> RankColumns:
        """Every query's ranking as :class:`RankColumns` (the metric@k curves), without building views; computed
        once."""
        if self._ranks is None:
            rows = RankRows()
            for i, example in enumerate(self.queries):
                judged = self.text.get(i)
                by_text = not example.is_id_labelled and bool(example.expected_answers)
                if judged is None:
                    ranking = [str(d) for d in self._row(i).ids]
                    rows.add(ranking, example.relevance, [[]] * len(ranking) if by_text else None,
                             len(example.expected_answers))
                else:
                    rows.add(judged.assignment.assigned, judged.assignment.relevance,
                             judged.matched if by_text else None, len(example.expected_answers))
            self._ranks = rows.columns()
        return self._ranks

    def query_columns(self) -> QueryColumns:
        """The score columns (every query holds every metric) and tags, without building views."""
        n = len(self.queries)
        return QueryColumns(list(self), {m: np.asarray(v, dtype=np.float64) for m, v in self.scores.items()},
                            {m: np.ones(n, dtype=bool) for m in self.scores}, self.tags())

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


@dataclass
class QueryColumns:
    """A run's per-query numbers as columns, in query order: ``ids``, each metric's ``values`` (NaN where a query
    lacks it) with ``present`` (whether the query holds it), each query's ``tags``, and ``mismatched``: row -> the
    ``query_id`` its record holds when that differs from its key (a file edited by hand)."""

    ids: list[str]
    values: dict[str, np.ndarray]
    present: dict[str, np.ndarray]
    tags: Sequence[Mapping[str, str]]
    mismatched: dict[int, str] = field(default_factory=dict)

    def held(self, metric: str) -> list[float]:
        """The values of ``metric`` of the queries holding it, in query order."""
        if metric not in self.values:
            return []
        return self.values[metric][self.present[metric]].tolist()  # type: ignore[no-any-return]

    def filled(self, metric: str) -> np.ndarray:
        """``metric``'s values with 0.0 where a query lacks it (all zeros when no query holds it)."""
        if metric not in self.values:
            return np.zeros(len(self.ids))
        return np.where(self.present[metric], self.values[metric], 0.0)

    def per_query(self) -> dict[str, dict[str, float]]:
        """query id -> metric -> value (the metrics each query holds)."""
        names = list(self.values)
        if not names:
            return {qid: {} for qid in self.ids}
        columns = [self.values[m].tolist() for m in names]
        if all(bool(self.present[m].all()) for m in names):
            rows = zip(*columns, strict=True)
            return {qid: dict(zip(names, row, strict=True)) for qid, row in zip(self.ids, rows, strict=True)}
        masks = [self.present[m].tolist() for m in names]
        return {qid: {m: columns[k][i] for k, m in enumerate(names) if masks[k][i]} for i, qid in enumerate(self.ids)}


def query_columns(per_query: Mapping[str, QueryResult]) -> QueryColumns:
    """The columns of ``per_query``: read from the store when it keeps them (the evaluator's table, a results file
    read back), else gathered from the records."""
    own = getattr(per_query, "query_columns", None)
    if callable(own):
        columns: QueryColumns = own()
        return columns
    ids: list[str] = []
    tags: list[Mapping[str, str]] = []
    found: dict[str, tuple[list[int], list[float]]] = {}
    mismatched: dict[int, str] = {}
    for row, (qid, qr) in enumerate(per_query.items()):
        ids.append(qid)
        tags.append(qr.tags)
        if qr.query_id != qid:
            mismatched[row] = qr.query_id
        for metric, value in qr.scores.items():
            rows, values = found.setdefault(metric, ([], []))
            rows.append(row)
            values.append(value)
    return _columns(ids, found, tags, mismatched)


def _columns(ids: list[str], found: Mapping[str, tuple[Sequence[int], Sequence[float]]],
             tags: Sequence[Mapping[str, str]], mismatched: dict[int, str]) -> QueryColumns:
    """Columns from each metric's (rows holding it, their values)."""
    n = len(ids)
    values: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    for metric, (rows, held) in found.items():
        if len(rows) == n:
            values[metric] = np.array(held, dtype=np.float64)
            present[metric] = np.ones(n, dtype=bool)
            continue
        index = np.array(rows, dtype=np.int64)
        values[metric] = np.full(n, np.nan)
        values[metric][index] = held
        present[metric] = np.zeros(n, dtype=bool)
        present[metric][index] = True
    return QueryColumns(ids, values, present, tags, mismatched)


@dataclass
class RankColumns:
    """What the metric@k curves need of every query, without its ranking: the length of its ranking (``num_ret``),
    and for each of its relevant ids (``qrel_lengths`` per query, in its record's order) the 0-based rank of the
    first document scored as that id, or -1 (``ranks``), and its grade (``grades``); for text-labelled queries
    with expected answers, how many answers each rank found first (``coverage``) and their number (``answers``)."""

    num_ret: np.ndarray
    qrel_lengths: np.ndarray
    ranks: np.ndarray
    grades: np.ndarray
    coverage: dict[int, list[int]]
    answers: np.ndarray


class RankRows:
    """:class:`RankColumns` gathered a query at a time."""

    def __init__(self) -> None:
        self.num_ret = array("q")  # machine numbers, not Python objects: 8 bytes each
        self.qrel_lengths = array("q")
        self.ranks = array("q")
        self.grades = array("d")
        self.coverage: dict[int, list[int]] = {}
        self.answers: dict[int, int] = {}

    def add(self, ranking: Sequence[str], relevant: Mapping[str, float] | None,
            matched: Sequence[Sequence[int]] | None, answers: int) -> None:
        """The next query: its ranking as scored (:attr:`QueryResult.ranking`), its relevant ids, and for a
        text-labelled query with expected answers the answers each rank matched and their number."""
        row = len(self.num_ret)
        self.num_ret.append(len(ranking))
        if relevant:
            for doc in relevant:  # the first rank of each relevant id (a repeated id counts once)
                try:
                    self.ranks.append(ranking.index(doc))
                except ValueError:
                    self.ranks.append(-1)
            self.grades.extend(relevant.values())
        self.qrel_lengths.append(len(relevant) if relevant else 0)
        if matched is not None:
            self.coverage[row] = answer_coverage(matched)
            self.answers[row] = answers

    def columns(self) -> RankColumns:
        answers = np.zeros(len(self.num_ret), dtype=np.int64)
        if self.answers:
            answers[list(self.answers)] = list(self.answers.values())
        return RankColumns(np.frombuffer(self.num_ret, dtype=np.int64), np.frombuffer(self.qrel_lengths, dtype=np.int64),
                           np.frombuffer(self.ranks, dtype=np.int64), np.frombuffer(self.grades, dtype=np.float64),
                           self.coverage, answers)
