"""The judgment plan of the text-labelled queries, as columns, and the verdicts back per query (:func:`plan_text`);
:func:`plan_pairs` plans a judge that needs no expected answer the same way, one (query, text) context per rank.

Every (retrieved document, expected answer) pair of a text-labelled query is one *element*; elements that show
a judge the same (query, expected answer, aliases, retrieved text) share one *context*, judged once. The plan
keeps the distinct answers and texts and, per element, the index of its context (numpy arrays): no
:class:`~evret_core.contracts.judge.JudgmentContext` is built unless a judge asks for one (see
:class:`~evret_core.contracts.judge.ContextColumns`). The contexts are numbered in first-seen order (queries in dataset
order, then rank, then answer), as the evaluator always numbered them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import AnswerKey, ContextColumns
from evret_core.contracts.retrieve import RankedColumns
from evret_core.io.queries import QueryExample

__all__ = ["RankVerdicts", "TextPlan", "answer_keys", "plan_pairs", "plan_text"]

_NO_ANSWERS: tuple[int, ...] = ()


def answer_keys(example: QueryExample) -> list[AnswerKey]:
    """What identifies each expected answer of ``example`` to a judge, beside the retrieved text: the query, the
    answer's canonical text and its other acceptable strings (deduplication keys on it)."""
    return [(example.query_text, expected, example.aliases_of(i))
            for i, expected in enumerate(example.expected_answers)]


@dataclass
class RankVerdicts:
    """One query's verdicts by rank: the answers each rank ``matched`` and those ``missing`` (unmeasured), the
    ranks that matched something (``hits``, ascending) and the number of unmeasured judgments."""

    matched: list[Sequence[int]]
    missing: list[Sequence[int]]
    hits: list[int]
    unmeasured: int


@dataclass
class TextPlan:
    """The distinct ``contexts``; per planned query (dataset index in ``queries``) its ``n_docs`` x ``n_answers``
    elements, which start at ``start[j]`` in ``context_of`` (the context of each element, rank-major)."""

    contexts: ContextColumns
    queries: list[int]
    n_docs: list[int]
    n_answers: list[int]
    start: np.ndarray
    context_of: np.ndarray

    def slots(self, j: int) -> np.ndarray:
        """Planned query ``j``'s context index per (rank, answer)."""
        return self.context_of[self.start[j] : self.start[j + 1]].reshape(self.n_docs[j], self.n_answers[j])

    def verdicts_by_rank(self, codes: np.ndarray) -> list[RankVerdicts]:
        """Per planned query, from ``codes`` (per context: 1 match, 0 no, -1 unmeasured): the answers each rank
        matched and those it could not be judged against (ascending answer index; a shared empty tuple where
        none), the ranks that matched something, and the count of unmeasured judgments."""
        element = codes[self.context_of]
        marked = np.flatnonzero(element)
        bounds = np.searchsorted(marked, self.start).tolist()
        marked_codes = element[marked].tolist()
        marked_list = marked.tolist()
        starts = self.start.tolist()
        out: list[RankVerdicts] = []
        for j, n in enumerate(self.n_docs):
            matched: list[Sequence[int]] = [_NO_ANSWERS] * n
            missing: list[Sequence[int]] = [_NO_ANSWERS] * n
            hits: list[int] = []
            unmeasured = 0
            k = self.n_answers[j]
            for m in range(bounds[j], bounds[j + 1]):
                rank, answer = divmod(marked_list[m] - starts[j], k)
                if marked_codes[m] > 0:
                    target = matched
                    if not hits or hits[-1] != rank:
                        hits.append(rank)
                else:
                    target = missing
                    unmeasured += 1
                held = target[rank]
                if held is _NO_ANSWERS:
                    target[rank] = [answer]
                else:
                    held.append(answer)
            out.append(RankVerdicts(matched, missing, hits, unmeasured))
        return out


def plan_text(queries: Sequence[QueryExample], row: Callable[[int], RankedColumns]) -> TextPlan:
    """The plan of every text-labelled query of ``queries`` (``row(i)``: query ``i``'s retrieved columns)."""
    return _plan(queries, row, answer_keys)


def plan_pairs(queries: Sequence[QueryExample], row: Callable[[int], RankedColumns]) -> TextPlan:
    """The plan of a judge that needs no expected answer (:attr:`~evret_core.contracts.judge.Judge.reference_free`):
    every query without relevant ids is judged on ``(query, retrieved text)``, one context per distinct pair, in
    first-seen order. Each planned query has one answer key, ``(query, "", ())`` (expected answers, when a query
    has some, are not used), so the plan's elements are its ranks."""
    return _plan(queries, row, lambda example: [(example.query_text, "", ())])


def _plan(queries: Sequence[QueryExample], row: Callable[[int], RankedColumns],
          keys_of: Callable[[QueryExample], list[AnswerKey]]) -> TextPlan:
    """The plan of every query without relevant ids, each judged against the answer keys ``keys_of`` gives it."""
    planned: list[int] = []
    rows: list[Sequence[Any]] = []
    answer_ids: dict[AnswerKey, int] = {}
    query_answers: list[int] = []  # the answer ids of every planned query, concatenated
    n_answers: list[int] = []
    for i, example in enumerate(queries):
        if example.is_id_labelled:
            continue
        ranked = row(i)
        if ranked.texts is None and len(ranked.ids):
            _no_text(example, ranked, 1)
        planned.append(i)
        # nothing retrieved (a query missing from a run, scored 0 with missing_queries="zero"): no texts to judge
        texts = [] if ranked.texts is None else ranked.texts
        rows.append(texts.tolist() if isinstance(texts, np.ndarray) else texts)
        keys = keys_of(example)
        n_answers.append(len(keys))
        query_answers.extend(answer_ids.setdefault(key, len(answer_ids)) for key in keys)
    answers = list(answer_ids)
    args = (queries, row, planned, n_answers, np.asarray(query_answers, dtype=np.int64))
    if len(answers) == len(query_answers):  # no answer shared by two queries, or given twice to one
        plan = _plan_by_query(answers, rows, *args)
        if plan is not None:
            return plan
    return _plan_global(answers, rows, *args)


def _plan_by_query(
    answers: list[AnswerKey],
    rows: list[Sequence[Any]],
    queries: Sequence[QueryExample],
    row: Callable[[int], RankedColumns],
    planned: list[int],
    n_answers: list[int],
    query_answers: np.ndarray,
) -> TextPlan | None:
    """The plan when no two queries share an answer: two contexts can then only be equal within one query, so
    texts are deduplicated query by query (small dicts: a dict of every text of a large run costs more than the
    rest of the plan). A text retrieved for two queries is in ``texts`` twice (judges that work per text
    deduplicate by value: :meth:`ContextColumns.per_text`). None when some text is not a str (the general path
    then judges it by its str form)."""
    texts: list[Any] = []
    n_docs: list[int] = []
    local_index: dict[int, list[int]] = {}  # planned query -> distinct-text index per rank, where texts repeat
    for j, ranked in enumerate(rows):
        try:
            "".join(ranked)  # raises unless every text is a str (C speed; a text None is reported below)
            distinct = dict.fromkeys(ranked)
        except TypeError:
            if any(t is None for t in ranked):
                i = planned[j]
                _no_text(queries[i], row(i), next(r for r, t in enumerate(ranked, 1) if t is None))
            return None
        n_docs.append(len(ranked))
        if len(distinct) == len(ranked):
            texts.extend(ranked)
        else:
            position = {t: u for u, t in enumerate(distinct)}
            local_index[j] = [position[t] for t in ranked]
            texts.extend(distinct)
    k = np.asarray(n_answers, dtype=np.int64)
    docs = np.asarray(n_docs, dtype=np.int64)
    distinct_docs = docs.copy()
    for j, index in local_index.items():
        distinct_docs[j] = max(index) + 1
    # query j's contexts: its distinct texts (first-seen order) x its answers, text-major, numbered from base[j]
    sizes = distinct_docs * k
    base = _offsets(sizes)
    if bool((k == 1).all()):  # one answer per query: a context per distinct text of the query, in order
        contexts = ContextColumns(answers, texts, np.repeat(query_answers, distinct_docs),
                                  np.arange(len(texts), dtype=np.int64))
    else:
        text_offset = _offsets(distinct_docs)[:-1]
        owner = np.repeat(np.arange(len(planned)), sizes)
        local = np.arange(int(base[-1]), dtype=np.int64) - base[owner]
        per = k[owner]
        answer_start = _offsets(k)[:-1]
        contexts = ContextColumns(answers, texts, query_answers[answer_start[owner] + local % per],
                                  text_offset[owner] + local // per)
    # elements (rank-major, then answer) -> contexts: the identity within a query whose texts are all distinct
    start = _offsets(docs * k)
    context_of = np.arange(int(start[-1]), dtype=np.int64) + np.repeat(base[:-1] - start[:-1], docs * k)
    for j, index in local_index.items():
        slots = base[j] + np.asarray(index, dtype=np.int64)[:, None] * k[j] + np.arange(k[j])
        context_of[start[j] : start[j + 1]] = slots.reshape(-1)
    return TextPlan(contexts, planned, n_docs, n_answers, start, context_of)


def _offsets(sizes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


def _plan_global(
    answers: list[AnswerKey],
    rows: list[Sequence[Any]],
    queries: Sequence[QueryExample],
    row: Callable[[int], RankedColumns],
    planned: list[int],
    n_answers: list[int],
    query_answers: np.ndarray,
) -> TextPlan:
    """The plan in general: every distinct text of the run numbered once (texts judged by their str form)."""
    text_ids: dict[Any, int] = {}
    n_docs: list[int] = []
    query_texts: list[int] = []  # the text ids of every planned query, concatenated
    for j, ranked in enumerate(rows):
        setdefault = text_ids.setdefault
        try:
            ids = [setdefault(t, len(text_ids)) for t in ranked]
        except TypeError:  # an unhashable text: judged by its str form, as every text is
            ids = [setdefault(None if t is None else str(t), len(text_ids)) for t in ranked]
        if None in text_ids:
            i = planned[j]
            _no_text(queries[i], row(i), next(r for r, t in enumerate(ranked, 1) if t is None))
        n_docs.append(len(ids))
        query_texts.extend(ids)
    distinct = list(text_ids)
    text_of = np.asarray(query_texts, dtype=np.int64)
    if any(type(t) is not str for t in distinct):  # non-str texts are judged by their str form: merge equal ones
        strings: dict[str, int] = {}
        remap = np.asarray([strings.setdefault(str(t), len(strings)) for t in distinct], dtype=np.int64)
        distinct = list(strings)
        text_of = remap[text_of] if len(text_of) else text_of
    return _number(answers, distinct, planned, n_docs, n_answers, query_answers, text_of)


def _number(
    answers: list[AnswerKey],
    texts: list[str],
    planned: list[int],
    n_docs: list[int],
    n_answers: list[int],
    query_answers: np.ndarray,
    text_of: np.ndarray,
) -> TextPlan:
    """Elements -> distinct contexts, numbered in first-seen order, all in numpy."""
    docs = np.asarray(n_docs, dtype=np.int64)
    k = np.asarray(n_answers, dtype=np.int64)
    sizes = docs * k
    start = np.zeros(len(planned) + 1, dtype=np.int64)
    np.cumsum(sizes, out=start[1:])
    total = int(start[-1])
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return TextPlan(ContextColumns(answers, texts, empty, empty), planned, n_docs, n_answers, start, empty)
    text_start = np.zeros(len(planned), dtype=np.int64)
    np.cumsum(docs[:-1], out=text_start[1:])
    answer_start = np.zeros(len(planned), dtype=np.int64)
    np.cumsum(k[:-1], out=answer_start[1:])
    if bool((k == 1).all()):  # the common case: one answer per query, an element per retrieved text
        element_answer = np.repeat(query_answers, docs)
        element_text = text_of
    else:
        owner = np.repeat(np.arange(len(planned)), sizes)
        local = np.arange(total, dtype=np.int64) - start[owner]
        per = k[owner]
        element_answer = query_answers[answer_start[owner] + local % per]
        element_text = text_of[text_start[owner] + local // per]
    code = element_answer * max(len(texts), 1) + element_text
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    firsts = first[order]
    contexts = ContextColumns(answers, texts, element_answer[firsts], element_text[firsts])
    return TextPlan(contexts, planned, n_docs, n_answers, start, rank[inverse].reshape(-1).astype(np.int64))


def _no_text(example: QueryExample, ranked: RankedColumns, rank: int) -> None:
    raise EvretError(
        f"query {example.query_id!r}: retrieved document {ranked.ids[rank - 1]!r} (rank {rank}) has no text "
        f"(metadata['text']); a query judged on text (text-labelled, or graded by a judge that needs no expected answer) needs the retrieved texts: for a run file (evret "
        f"evaluate --run) give --corpus CORPUS.jsonl, the texts of its documents; a retriever returns each "
        f"document's text"
    )
