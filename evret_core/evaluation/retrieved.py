"""The retrieved rows of a whole evaluation, as columns, and the metric arrays built from them.

Each query's row is a :class:`~evret_core.contracts.retrieve.RankedColumns` (ids, scores, texts), or, for a precomputed
run in the TREC dict form ``{docid: score}``, the dict itself: it is ranked only when that query's detail is
asked for, and the metrics read the dicts directly (the compiled reader of :mod:`evret_core.metrics.engine`).
:func:`retrieve_run` retrieves the rows from a retriever (the evaluator's retrieval, and the RAG harness's);
:func:`~evret_core.evaluation.run_rows.precomputed_rows` looks them up in a precomputed run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evret_core.assign import coverage_matrix
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor
from evret_core.contracts.metric import RankedBatch
from evret_core.contracts.retrieve import RankedColumns, coerce_results
from evret_core.io.queries import QueryExample
from evret_core.metrics.engine import _batch_from_read, accelerator, batch_from_run
from evret_core.plugins.loading import plugin_exits_as_errors
from evret_core.progress import ProgressCallback, report_progress
from evret_core.results.per_query import TextJudgments

EMPTY = RankedColumns((), np.zeros(0), None)

Row = RankedColumns | Mapping[str, Any]


def rank_dict(scores: Mapping[Any, Any], k: int) -> RankedColumns:
    """A ``{docid: score}`` dict ranked as trec_eval ranks a run: score descending, ties by id descending."""
    pairs = [(str(d), float(s)) for d, s in scores.items()]
    pairs.sort(key=lambda item: item[0], reverse=True)
    pairs.sort(key=lambda item: item[1], reverse=True)  # stable: ties keep the descending-id order
    pairs = pairs[:k]
    return RankedColumns([d for d, _ in pairs], np.asarray([s for _, s in pairs], dtype=np.float64), None)


def coerce_row(raw: Any, where: str, k: int) -> Row:
    """One query's results in any accepted form, as a row: a ``{docid: score}`` dict stays a dict (ranked
    lazily); ranked ids (``["d3", "d1"]``), result objects or dicts become columns cut to ``k``."""
    if type(raw) is dict:  # the common precomputed row, before the slower ABC checks
        return raw
    if isinstance(raw, RankedColumns):
        return raw.head(k)
    if isinstance(raw, Mapping):
        return raw
    if raw is None:
        raise EvretError(f"{where} returned None instead of a list of results")
    if isinstance(raw, (str, bytes)):  # iterating it would give one-character document ids
        raise EvretError(f"{where}: got the string {_short(raw)} instead of a list of results (document ids, "
                         f"result objects or dicts, or a {{doc_id: score}} mapping)")
    items = list(raw) if not isinstance(raw, list | tuple | np.ndarray) else raw
    if len(items) and all(type(item) is str for item in items):
        ids = list(items[:k])
        return RankedColumns(ids, np.arange(len(ids), 0, -1, dtype=np.float64), None)
    columns = _plain_records(list(items[:k]))
    return columns if columns is not None else RankedColumns.from_results(coerce_results(items, where)[:k])


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def extra_run_queries(run: Mapping[str, Any], queries: Sequence[QueryExample]) -> list[str]:
    """The query ids of a precomputed ``run`` that the dataset does not have, in run order: they are ignored (a run
    often covers more queries than the dataset scores, e.g. every split), and the evaluator reports them."""
    wanted = {q.query_id for q in queries}
    return [qid for qid in run if qid not in wanted]


def retrieve_run(retriever: Any, ids: Sequence[str], texts: Sequence[str], k: int, executor: Executor,
                 batch_size: int, progress: ProgressCallback | None) -> RetrievedRows:
    """Every query's retrieved row, cut to ``k``, from a retriever with ``batch_retrieve``: query ``i`` (id
    ``ids[i]``, text ``texts[i]``) in calls of ``batch_size`` queries run by ``executor``, reported as the
    ``retrieve`` stage (the evaluator's retrieval, and the RAG harness's)."""
    where = f"retriever {type(retriever).__name__}"
    batches = [list(texts[start : start + batch_size]) for start in range(0, len(texts), batch_size)]
    report_progress(progress, "retrieve", 0, len(texts))  # starts the stage's clock and bar (evret_core.progress)
    with plugin_exits_as_errors():  # a plugin's sys.exit() in the stage is its PluginError
        got = executor.retrieve(retriever, batches, k,
                                lambda done: report_progress(progress, "retrieve", done, len(texts)))
    rows: list[Row] = []
    for start, chunk_texts, batch in zip(range(0, len(texts), batch_size), batches, got, strict=True):
        if len(batch) != len(chunk_texts):
            raise EvretError(f"{where} returned {len(batch)} result lists for {len(chunk_texts)} queries")
        chunk = ids[start : start + batch_size]
        rows.extend(coerce_row(raw, f"{where}, query {qid!r}", k) for qid, raw in zip(chunk, batch, strict=True))
    return RetrievedRows(rows, k)


_PLAIN_KEYS = ({"doc_id", "score", "text"}, {"doc_id", "score"}, {"doc_id", "text"}, {"doc_id"})


def _plain_records(items: Sequence[Any] | np.ndarray) -> RankedColumns | None:
    """Columns straight from dicts ``{"doc_id": str, "score": number, "text": str}`` (no object per result), or
    None when any item is something else (the general path then validates it and names the bad one)."""
    if not all(type(item) is dict and item.keys() in _PLAIN_KEYS for item in items):
        return None
    ids = [item["doc_id"] for item in items]
    texts = [item.get("text") for item in items]
    if not all(type(d) is str and d for d in ids) or not all(t is None or type(t) is str for t in texts):
        return None
    try:
        scores = np.fromiter((item.get("score", 0.0) for item in items), dtype=np.float64, count=len(items))
    except (TypeError, ValueError):
        return None
    return RankedColumns(ids, scores, None if all(t is None for t in texts) else texts)


class RetrievedRows:
    """Every query's row, in dataset order; ``row(i)`` is always columns (dict rows ranked on the fly)."""

    def __init__(self, rows: list[Row], k: int) -> None:
        self.rows = rows
        self.k = k

    def __len__(self) -> int:
        return len(self.rows)

    def row(self, i: int) -> RankedColumns:
        raw = self.rows[i]
        return raw if isinstance(raw, RankedColumns) else rank_dict(raw, self.k)

    def to_results(self) -> list[list[Any]]:
        return [self.row(i).to_results() for i in range(len(self.rows))]

    def empty_indexes(self) -> list[int]:
        """The indexes of the queries that retrieved nothing."""
        return [i for i, raw in enumerate(self.rows) if not len(raw)]

    def batch(
        self,
        queries: Sequence[QueryExample],
        start: int,
        stop: int,
        text: Mapping[int, TextJudgments],
        any_match: bool,
    ) -> RankedBatch:
        """The :class:`RankedBatch` of queries ``start:stop``: judged ids by rank, relevance, answer coverage."""
        span = range(start, stop)
        raw = self.rows[start:stop]
        if all(isinstance(r, dict) for r in raw) and all(queries[i].is_id_labelled for i in span):
            batch = self._dict_batch(queries, span, raw)
            if batch is not None:
                return batch
        rankings: list[Sequence[str]] = []
        qrels: list[Mapping[str, float]] = []
        for i in span:
            judged = text.get(i)
            if judged is None:
                rankings.append(self.row(i).ids)
                qrels.append(queries[i].relevance)
            else:
                rankings.append(judged.assignment.assigned)
                qrels.append(judged.assignment.relevance)
        batch = RankedBatch.from_rankings(rankings, qrels)
        if any_match and text:
            found = [None if (j := text.get(i)) is None else j.assignment.coverage for i in span]
            counts = [0 if (j := text.get(i)) is None else len(queries[i].expected_answers) for i in span]
            batch.set_answer_coverage(coverage_matrix(found, batch.depth), np.asarray(counts, dtype=np.float64))
        return batch

    def _dict_batch(self, queries: Sequence[QueryExample], span: range, raw: list[Row]) -> RankedBatch | None:
        """Straight from the run's dicts (no per-document Python work), or None when their keys are not all str."""
        dicts: list[dict[str, float]] = [r for r in raw if isinstance(r, dict)]
        fast = accelerator()
        # the compiled reader takes each query's run dict and qrels dict, in order. A validated query's grades
        # are already a dict of str -> float, given as is; the reader checks every key and value itself and
        # declines (None) anything else, which then takes the general path with ``relevance``'s conversion
        read = None if fast is None else fast.rank_chunk(dicts, [_grades(queries[i]) for i in span])
        if read is not None:
            batch = _batch_from_read(read, self.k, None)
        elif all(type(d) is str for scores in dicts for d in scores):
            keys = [str(i) for i in span]
            qrels = {key: queries[i].relevance for key, i in zip(keys, span, strict=True)}
            batch = batch_from_run(qrels, dict(zip(keys, dicts, strict=True)), keys, depth=self.k)
        else:
            return None  # e.g. int doc ids: ranked by their str form on the general path
        batch.num_ret = np.minimum(batch.num_ret, self.k)  # the run is cut to k, as a retriever's would be
        return batch


def _grades(query: QueryExample) -> Mapping[str, Any]:
    """The query's grades without a copy when they are a dict (see ``_dict_batch``), else ``relevance``."""
    ids = query.relevant_doc_ids
    return ids if type(ids) is dict else query.relevance
