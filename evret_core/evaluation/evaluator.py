"""The retrieval evaluator: retrieve, judge, assign ids, compute metrics.

The pipeline keeps its bulk data as columns: each query's retrieved ids, scores and texts
(:class:`~evret_core.contracts.retrieve.RankedColumns`, or a precomputed ``{docid: score}`` dict read as it is), the
judge's verdicts as one array over the distinct judgment contexts, and one score array per metric. The
:class:`~evret_core.results.evaluation.EvaluationResults` it returns builds a query's :class:`QueryResult` when asked.

How judgments become id sets (``first_match`` rank-priority matching, ``any_match``) is :mod:`evret_core.assign`.
A query with ``relevant_doc_ids`` is scored on ids (graded when grades are given), without judging.

A query with neither expected answers nor ids needs a judge that needs no expected answer
(:attr:`~evret_core.contracts.judge.Judge.reference_free`, e.g. ``relevance``); any other judge is refused before
retrieval (:meth:`Evaluator.check_labels`). With such a judge every query without ids is graded on ``(query,
retrieved text)`` (:func:`~evret_core.judge.judgment_plan.plan_pairs`, ``Executor.grade``), its grades become its
relevant ids (:func:`~evret_core.assign.assign_graded`, zeros included), and it is scored exactly as an id-labelled
query with those grades; ``stats["judged"]`` counts the pairs, the grades and the unmeasured ones (left unjudged).
The binary measures count a grade >= ``relevance_level`` as relevant (default: the judge's ``cut``).

Judgments that could not be made (``None`` from a judge, e.g. an LLM call that failed after every retry) are
reported per query and in ``stats["unmeasured"]``; in the metrics they count as not matching. Pass
``fail_on_unmeasured=True`` to fail the run instead.

A precomputed run must cover every query of the dataset: missing queries are an error naming them, unless
``missing_queries="zero"``, which scores them 0 and lists them in ``stats["missing_queries"]``.

Queries that retrieved nothing are counted in ``stats["empty_retrieval"]``; when no query retrieved anything (a
filter that matches nothing, an empty index), the scores are zeros that say nothing about the retriever, and
:meth:`Evaluator.evaluate` says so with an :class:`EmptyRetrievalWarning` carrying the count.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from evret_core.assign import (
    MATCHING_MODES,
    Assignment,
    answer_id,
    assign_graded,
    assign_text,
    check_matching,
)
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor, JudgeRun
from evret_core.contracts.judge import AnswerKey, JudgmentContext, judge_progress
from evret_core.contracts.kinds import JUDGE
from evret_core.contracts.metric import Metric
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult
from evret_core.contracts.values import grade_key
from evret_core.evaluation.executors import resolve_executor
from evret_core.evaluation.retrieved import RetrievedRows, extra_run_queries, retrieve_run
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.judge.judgment_plan import TextPlan, answer_keys, plan_pairs, plan_text
from evret_core.judge.resolve import DEFAULT_JUDGE, resolve_judge
from evret_core.metrics.engine import resolve_judged_defaults
from evret_core.plugins import builder
from evret_core.plugins.loading import plugin_exits_as_errors
from evret_core.progress import after_a_while
from evret_core.results.evaluation import SCHEMA_VERSION, EvaluationResults, add_statistics
from evret_core.results.per_query import QueryTable, TextJudgments
from evret_core.retrieve.retrievers import PrecomputedRetriever, resolve_retriever

__all__ = ["DEFAULT_DEPTH", "MATCHING_MODES", "MISSING_QUERIES", "EmptyRetrievalWarning", "Evaluator",
           "UnmeasuredJudgmentsError", "answer_id", "answer_keys", "judgment_context"]

DEFAULT_DEPTH = 100
MISSING_QUERIES = ("error", "zero")
_CHUNK = 2048  # queries per metric batch: bounds the arrays of the metric step
_VERDICT_CODE = {True: 1, False: 0, None: -1}


def judgment_context(answer: AnswerKey, retrieved_text: str) -> JudgmentContext:
    """A judgment context from an :func:`answer_keys` entry and a retrieved text (the evaluator itself keeps
    contexts as :class:`~evret_core.contracts.judge.ContextColumns`, which build theirs the same way)."""
    query, expected, aliases = answer
    return JudgmentContext(query=query, expected_text=expected, retrieved_text=retrieved_text, aliases=aliases)


def _verdict_codes(verdicts: Sequence[bool | None]) -> np.ndarray:
    """1 match / 0 no / -1 unmeasured per verdict, as int8."""
    if None in verdicts:
        return np.fromiter(map(_VERDICT_CODE.__getitem__, verdicts), dtype=np.int8, count=len(verdicts))
    return np.fromiter(verdicts, dtype=bool, count=len(verdicts)).view(np.int8)


def _str_ids(ids: Sequence[Any]) -> list[str]:
    """``ids`` as a list of str (read, not copied, when it already is one)."""
    if type(ids) is list:
        try:
            "".join(ids)  # raises unless every id is a str: a C-speed check, far cheaper than str() per id
            return ids
        except TypeError:
            pass
    return list(map(str, ids))


class UnmeasuredJudgmentsError(EvretError):
    """Raised with ``fail_on_unmeasured=True`` when some judgments could not be made."""


class EmptyRetrievalWarning(UserWarning):
    """No query of an evaluation retrieved anything: its scores are zeros that say nothing about the retriever.
    ``count`` and ``total`` are the queries that retrieved nothing and the queries of the dataset."""

    def __init__(self, count: int, total: int) -> None:
        super().__init__(empty_retrieval_message(count, total))
        self.count = count
        self.total = total


def empty_retrieval_message(count: int, total: int, what: str = "query", plural: str = "queries") -> str:
    """What a run in which ``count`` of ``total`` queries (``what``/``plural``) retrieved nothing means (all of
    them: nothing)."""
    if count < total:
        return f"{count} of {total} {plural} retrieved nothing"
    return (f"every {what} ({count} of {total}) retrieved nothing: the scores are zeros that say nothing about the "
            f"retriever; check its options (a filter that matches nothing, an empty or wrong index or collection)")


class Evaluator:
    """Scores a retriever on a dataset.

    :param retriever: an Evret retriever, a function ``(query, k)``, a precomputed run ``{query_id: results}``
        (results: ``{docid: score}`` as in TREC/pytrec_eval, ranked ids, result objects or dicts), or any object
        an installed plugin can adapt (a LangChain retriever with evret-langchain).
    :param metrics: metric names (``"ndcg@10"``) or :class:`~evret_core.contracts.metric.Metric` objects.
    :param judge: a judge object or a registered judge name; needed when the dataset has text labels
        (default: :data:`~evret_core.judge.DEFAULT_JUDGE`, ``contains``).
    :param judge_options: options of the judge given by name (of the default judge when ``judge`` is None), such
        as ``{"min_tokens": 2}`` for ``token-overlap``; an option the judge does not take is an error naming it and
        the options it accepts.
    :param matching: ``first_match`` or ``any_match`` (see :mod:`evret_core.assign`).
    :param k: how many documents to retrieve; default the largest metric cutoff (100 when no metric has one).
        A metric cutoff deeper than ``k`` is an error.
    :param fail_on_unmeasured: raise :class:`UnmeasuredJudgmentsError` when a judgment could not be made.
    :param progress: called as ``progress(stage, done, total)`` while retrieving and judging; a judge's own
        long work before judging (the semantic judge's encoding, stage ``"encode"``) reports through it too
        (:func:`evret_core.contracts.judge.report_progress`).
    :param batch_size: queries per ``batch_retrieve`` call.
    :param judge_batch_size: contexts per ``batch_judge`` call (progress is reported between calls; the judge's
        ``prepare`` sees every context first, so per-text work such as embedding is still done in one pass).
    :param confidence_level, n_resamples, seed: the percentile bootstrap intervals of the means (and slices).
    :param min_slice_size: slices (queries sharing a tag value) smaller than this are flagged ``small``.
    :param missing_queries: for a precomputed run that lacks some of the dataset's queries: ``"error"``
        (default) or ``"zero"`` (score them 0 and list them in ``stats["missing_queries"]``).
    :param executor: where retrieval, judging and metrics run: ``"local"`` (default, this process), a name an
        installed plugin registers (``"ray"`` with evret-ray), or an :class:`~evret_core.contracts.executor.Executor`.
        Every executor gives the same scores; the results' ``config["executor"]`` says which one ran.
    :param executor_options: options of an executor given by name (``{"address": "auto"}`` for ``ray``).
    :param relevance_level: the binary measures (precision, recall, mrr, ap...) count a grade >= this as relevant
        (``evret trec -l``); default: grade > 0, or the judge's ``cut`` when a graded judge that needs no expected
        answer grades the queries without labels.
    """

    name = "retrieval"

    def __init__(
        self,
        retriever: Any,
        metrics: Sequence[str | Metric],
        judge: Any = None,
        matching: str = "first_match",
        k: int | None = None,
        fail_on_unmeasured: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
        batch_size: int = 256,
        judge_batch_size: int = 1024,
        confidence_level: float = 0.95,
        n_resamples: int = 1000,
        seed: int = 0,
        min_slice_size: int = 10,
        missing_queries: str = "error",
        executor: str | Executor | None = None,
        executor_options: dict[str, Any] | None = None,
        judge_options: dict[str, Any] | None = None,
        relevance_level: float | None = None,
    ) -> None:
        from evret_core.plugins.registry import create_metric
        from evret_core.statistics.inference import check_confidence_level, check_resamples

        if not metrics:
            raise EvretError("no metrics given: name at least one, e.g. recall@10")
        self.metrics: list[Metric] = [m if isinstance(m, Metric) else create_metric(m) for m in metrics]
        names = [m.name for m in self.metrics]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise EvretError(f"metric(s) given twice: {', '.join(duplicates)}")
        self.matching = check_matching(matching)
        if missing_queries not in MISSING_QUERIES:
            raise EvretError(f"missing_queries must be one of {', '.join(MISSING_QUERIES)}, got {missing_queries!r}")
        self.missing_queries = missing_queries
        self.retriever = resolve_retriever(retriever)
        if isinstance(judge, str) or (judge is None and judge_options):
            options = dict(judge_options or {})
            self.judge = builder.build(JUDGE, judge or DEFAULT_JUDGE, options, sources=dict.fromkeys(options, "Python"))
        elif judge_options:
            raise EvretError("judge_options apply to a judge given by name, not to a judge object")
        else:
            self.judge = judge
        depths = [m.depth for m in self.metrics if m.depth is not None]
        if k is not None and int(k) <= 0:
            raise EvretError(f"k must be a positive integer, got {k}")
        self.k = int(k) if k is not None else (max(depths) if depths else DEFAULT_DEPTH)
        deeper = [m.name for m in self.metrics if m.depth is not None and m.depth > self.k]
        if deeper:
            raise EvretError(
                f"metric {', '.join(deeper)} reads deeper than the retrieval depth k={self.k}: retrieve at least "
                f"{max(m.depth or 0 for m in self.metrics)} documents (raise k) or lower the cutoff"
            )
        self.fail_on_unmeasured = fail_on_unmeasured
        self.progress = progress
        self.batch_size = max(1, int(batch_size))
        self.judge_batch_size = max(1, int(judge_batch_size))
        self.confidence_level = check_confidence_level(confidence_level)
        self.n_resamples = check_resamples(n_resamples)
        self.seed = int(seed)
        self.min_slice_size = int(min_slice_size)
        self.executor = resolve_executor(executor, executor_options)
        self._missing: list[str] = []  # the queries a precomputed run lacked, in the last retrieval
        self._extra: list[str] = []  # the precomputed run's queries that the dataset lacks (ignored)
        self._unmeasured: dict[int, int] = {}  # query index -> its unmeasured judgments, in the last evaluation
        if relevance_level is not None and (isinstance(relevance_level, bool) or not isinstance(
                relevance_level, (int, float)) or not math.isfinite(relevance_level)):
            raise EvretError(f"relevance_level must be a finite number, got {relevance_level!r}")
        self.relevance_level = None if relevance_level is None else float(relevance_level)
        self._level: float | None = self.relevance_level  # the level of the last evaluation (the judge's cut)

    # -- pipeline ----------------------------------------------------------------------------------------------
    def retrieve(self, dataset: EvaluationDataset) -> list[list[RetrievalResult]]:
        """Ranked results for every query of ``dataset``, cut to ``k``, as objects (the evaluator itself keeps
        columns: :meth:`retrieve_rows`)."""
        return self.retrieve_rows(dataset).to_results()

    def retrieve_rows(self, dataset: EvaluationDataset) -> RetrievedRows:
        """Every query's retrieved row (columns, or a precomputed run's dict), cut to ``k``."""
        queries = dataset.queries
        if isinstance(self.retriever, PrecomputedRetriever):
            return self._precomputed_rows(queries)
        return retrieve_run(self.retriever, [q.query_id for q in queries], [q.query_text for q in queries], self.k,
                            self.executor, self.batch_size, self.progress)

    def _precomputed_rows(self, queries: Sequence[QueryExample]) -> RetrievedRows:
        """A precomputed run's rows (:func:`~evret_core.evaluation.run_rows.precomputed_rows`); the queries it
        lacks and those it has beyond the dataset are kept for the stats."""
        # run_rows reads runs as columns (the TREC scanner): imported only for a precomputed run
        from evret_core.evaluation.run_rows import precomputed_rows

        assert isinstance(self.retriever, PrecomputedRetriever)
        run = self.retriever.run
        rows, self._missing = precomputed_rows(run, [q.query_id for q in queries], self.k, self.missing_queries)
        self._extra = extra_run_queries(run, queries)
        return rows

    def plan_judgments(self, dataset: EvaluationDataset, retrieved: Any) -> list[JudgmentContext]:
        """The distinct judgment contexts the text-labelled queries need (with a judge that needs no expected
        answer: every query without ids, ``(query, text)``), in first-seen order."""
        rows = retrieved if isinstance(retrieved, RetrievedRows) else RetrievedRows(
            [RankedColumns.from_results(r) for r in retrieved], self.k)
        graded = self.check_labels(dataset)
        return list((plan_pairs if graded else plan_text)(dataset.queries, rows.row).contexts)

    def check_labels(self, dataset: EvaluationDataset, source: str | None = None) -> bool:
        """Whether the queries without relevant ids are graded by a judge that needs no expected answer; an
        EvretError, before any retrieval, when some query has neither expected answers nor ids and the judge
        needs them (``source``: the dataset file the message names)."""
        queries = dataset.queries
        bare = sum(q.is_unlabelled for q in queries)
        if self.judge is None:
            if not bare:
                return False  # the default judge needs expected answers, and every query has them or ids
            self.judge = resolve_judge()
        name = getattr(self.judge, "name", type(self.judge).__name__)
        if not getattr(self.judge, "reference_free", False):
            if bare:
                where = source or f"dataset {dataset.name or '(unnamed)'}"
                raise EvretError(
                    f"{where}: {bare} {'query has' if bare == 1 else 'queries have'} neither expected answers nor "
                    f"relevant ids; judge {name!r} needs expected answers: give --judge relevance (grades each "
                    f"passage against the query alone, 0-3), or label them")
            return False
        if all(q.is_id_labelled for q in queries):
            return False  # every query is scored on ids: nothing to grade
        if self.matching == "any_match":
            raise EvretError(f"matching 'any_match' counts the expected answers found, and judge {name!r} grades "
                             f"passages against the query alone: use first_match (the default)")
        return True

    def run_judge(self, contexts: Sequence[JudgmentContext]) -> dict[JudgmentContext, bool | None]:
        """The judge's verdict on each context (None: could not be judged)."""
        return dict(zip(contexts, self._judge(contexts).verdicts, strict=True))

    def _judge(self, contexts: Sequence[JudgmentContext]) -> JudgeRun:
        if not contexts:
            return JudgeRun([])
        if self.judge is None:
            from evret_core.judge.resolve import resolve_judge

            self.judge = resolve_judge()
        self._report("judge", 0, len(contexts))  # before prepare(), whose encoding is part of the stage
        from evret_core.contracts.judge import judge_progress

        # judge_progress: e.g. a judge's encoding; plugin_exits_as_errors: a plugin's sys.exit() is its PluginError
        with judge_progress(self._report if self.progress is not None else None), plugin_exits_as_errors():
            run = self.executor.judge(self.judge, contexts, self.judge_batch_size,
                                      lambda done: self._report("judge", done, len(contexts)))
        if len(run.verdicts) != len(contexts):
            raise EvretError(f"executor {self.executor.name!r} returned {len(run.verdicts)} verdicts for "
                             f"{len(contexts)} contexts")
        return run

    def _grade(self, contexts: Sequence[JudgmentContext]) -> JudgeRun:
        """The judge's grades of ``contexts`` through ``executor.grade``, reported as the judge stage."""
        if not contexts:
            return JudgeRun([], grades=[])
        self._report("judge", 0, len(contexts))
        with judge_progress(self._report if self.progress is not None else None), plugin_exits_as_errors():
            run = self.executor.grade(self.judge, contexts, self.judge_batch_size,
                                      lambda done: self._report("judge", done, len(contexts)))
        if run.grades is None or len(run.grades) != len(contexts):
            got = "no" if run.grades is None else len(run.grades)
            raise EvretError(f"executor {self.executor.name!r} returned {got} grades for {len(contexts)} contexts")
        return run

    def evaluate(self, dataset: EvaluationDataset) -> EvaluationResults:
        """Retrieve, judge and score every query of ``dataset``."""
        if not isinstance(dataset, EvaluationDataset):
            raise EvretError(f"evaluate() needs an EvaluationDataset, got {type(dataset).__name__}")
        graded = self.check_labels(dataset)  # before any retrieval
        started = time.time()
        self._missing, self._extra = [], []
        queries = dataset.queries
        rows = self.retrieve_rows(dataset)
        plan = (plan_pairs if graded else plan_text)(queries, rows.row)
        contexts = plan.contexts
        judged_stats: dict[str, Any] | None = None
        if graded:
            judged = self._grade(contexts)
            codes = _verdict_codes(judged.verdicts)
            text, judged_stats = self._assign_grades(queries, rows, plan, judged.grades or [])
        else:
            judged = self._judge(contexts)
            codes = _verdict_codes(judged.verdicts)
            text = self._assign(queries, rows, plan, codes)
        self._level = self.relevance_level
        if graded and self._level is None and getattr(self.judge, "grades", None) is not None:
            cut = getattr(self.judge, "cut", None)
            self._level = None if cut is None else float(cut)
        scores = self._scores(queries, rows, text)
        missing = set(self._missing)
        empty = [queries[i].query_id for i in rows.empty_indexes() if queries[i].query_id not in missing]
        if queries and len(empty) + len(missing) == len(queries):
            warnings.warn(EmptyRetrievalWarning(len(queries), len(queries)), stacklevel=2)
        unmeasured_queries = [queries[i].query_id for i in self._unmeasured]
        unmeasured = sum(self._unmeasured.values())
        if unmeasured and self.fail_on_unmeasured:
            raise UnmeasuredJudgmentsError(
                f"{unmeasured} judgment(s) could not be made, touching {len(unmeasured_queries)} queries: "
                f"{', '.join(unmeasured_queries[:10])}{' ...' if len(unmeasured_queries) > 10 else ''}"
            )
        stats: dict[str, Any] = {
            "num_queries": len(queries),
            "judgments": {
                "contexts": int(len(plan.context_of)),
                "unique": len(contexts),
                "unmeasured": int((codes < 0).sum()),
            },
            "unmeasured": {"judgments": unmeasured, "queries": unmeasured_queries,
                           "counted_as": "unjudged" if graded else "not matching"},
        }
        if judged_stats is not None:
            stats["judged"] = {**judged_stats, "relevance_level": self._level}
        if self._missing:
            stats["missing_queries"] = {"count": len(self._missing), "queries": self._missing, "counted_as": 0.0}
        if empty:  # a filter that matches nothing must not read as a retriever that scores zero
            stats["empty_retrieval"] = {"count": len(empty), "of": len(queries), "queries": empty[:20]}
        if self._extra:  # a run's queries that the dataset lacks are ignored, and said so
            stats["extra_run_queries"] = {"count": len(self._extra), "queries": self._extra[:20], "ignored": True}
        stats["elapsed_s"] = round(time.time() - started, 6)
        judge_stats = getattr(self.judge, "stats", None)
        if judged.stats is None and callable(judge_stats):  # nothing judged this run: the judge's own counters
            judged = replace(judged, stats=judge_stats())
        if judged.stats is not None:
            stats["judge"] = judged.stats
            for key in ("cost", "parsing", "injection"):  # LLM judges: cost per provider, parse fallbacks, injections
                if isinstance(stats["judge"], dict) and key in stats["judge"]:
                    stats[key] = stats["judge"][key]
        results = EvaluationResults.model_construct(
            schema_version=SCHEMA_VERSION,
            scores={name: float(values.mean()) if len(values) else 0.0 for name, values in scores.items()},
            metrics=[m.name for m in self.metrics],
            per_query=QueryTable(queries, rows.row, scores, text),
            config=self.config(),
            stats=stats,
        )
        return add_statistics(results, dataset, self.confidence_level, self.n_resamples, self.seed,
                              self.min_slice_size, progress=after_a_while(self.progress))

    def dry_run(self, dataset: EvaluationDataset) -> dict[str, Any]:
        """Retrieve and plan the judgments without judging: how many would be sent after dedupe and cache, and a
        token estimate when the judge can make one (``judge.plan``). Nothing is sent to an LLM."""
        if self.judge is None:
            from evret_core.judge.resolve import resolve_judge

            self.judge = resolve_judge()
        graded = self.check_labels(dataset)
        contexts = (plan_pairs if graded else plan_text)(dataset.queries, self.retrieve_rows(dataset).row).contexts
        plan = getattr(self.judge, "plan", None)
        if callable(plan):
            return dict(plan(contexts))
        return {"contexts": len(contexts), "unique": len(contexts), "cached": 0, "to_send": 0,
                "note": f"judge {getattr(self.judge, 'name', type(self.judge).__name__)!r} makes no API calls"}

    def config(self) -> dict[str, Any]:
        retriever_config = getattr(self.retriever, "config", None)
        judge_config = getattr(self.judge, "config", None)
        level = {} if self._level is None else {"relevance_level": self._level}  # only when set: files stay as they were
        return {
            "retriever": retriever_config() if callable(retriever_config) else {"name": type(self.retriever).__name__},
            "judge": judge_config() if callable(judge_config) else (None if self.judge is None else repr(self.judge)),
            "metrics": [m.config() for m in self.metrics],
            "matching": self.matching,
            "k": self.k,
            "executor": self.executor.config(),
            **level,
        }

    # -- assignment and metrics ----------------------------------------------------------------------------------
    def _assign(
        self, queries: Sequence[QueryExample], rows: RetrievedRows, plan: TextPlan, codes: np.ndarray
    ) -> dict[int, TextJudgments]:
        """Each text-labelled query's verdicts (``codes`` per context: 1 match / 0 no / -1 unmeasured) as matched
        answers per rank, then ids through :func:`evret_core.assign.assign_text`."""
        text: dict[int, TextJudgments] = {}
        self._unmeasured = {}
        for i, verdicts in zip(plan.queries, plan.verdicts_by_rank(codes), strict=True):
            ids = _str_ids(rows.row(i).ids)
            assignment = assign_text(ids, verdicts.matched, len(queries[i].expected_answers), self.matching,
                                     verdicts.hits)
            text[i] = TextJudgments(verdicts.matched, verdicts.missing, assignment)  # type: ignore[arg-type]
            if verdicts.unmeasured:
                self._unmeasured[i] = verdicts.unmeasured
        return text

    def _assign_grades(
        self, queries: Sequence[QueryExample], rows: RetrievedRows, plan: TextPlan, grades: Sequence[float | None]
    ) -> tuple[dict[int, TextJudgments], dict[str, Any]]:
        """Each graded query's grades (one per context of :func:`plan_pairs`) as its relevant ids
        (:func:`evret_core.assign.assign_graded`), its ranking left as retrieved; and the counts of
        ``stats["judged"]``. A document whose grade could not be made is unjudged and shows ``unmeasured: [0]``
        (0: the query, its one "answer")."""
        by_context = np.asarray([np.nan if g is None else g for g in grades], dtype=np.float64)
        text: dict[int, TextJudgments] = {}
        self._unmeasured = {}
        histogram: dict[float, int] = {}
        pairs = unmeasured_pairs = with_answers = 0
        for j, i in enumerate(plan.queries):
            ids = _str_ids(rows.row(i).ids)
            ranked = by_context[plan.context_of[plan.start[j] : plan.start[j + 1]]].tolist()
            per_rank: list[float | None] = [None if g != g else g for g in ranked]  # NaN: unmeasured
            relevance = assign_graded(ids, per_rank)
            none: list[int] = []  # shared by the ranks without a mark (never mutated)
            missing: list[list[int]] = [none] * len(ids)
            seen: set[str] = set()
            for r, doc in enumerate(ids):
                if doc not in seen and doc not in relevance:
                    missing[r] = [0]
                seen.add(doc)
            lost = len(seen) - len(relevance)
            if lost:
                self._unmeasured[i] = lost
            pairs += len(seen)
            unmeasured_pairs += lost
            with_answers += bool(queries[i].expected_answers)
            for grade in relevance.values():
                histogram[grade] = histogram.get(grade, 0) + 1
            text[i] = TextJudgments([none] * len(ids), missing, Assignment(ids, relevance))
        name = getattr(self.judge, "name", type(self.judge).__name__)
        stats = {"judge": name, "grades": getattr(self.judge, "grades", None), "queries": len(plan.queries),
                 "pairs": pairs, "unmeasured": unmeasured_pairs,
                 "histogram": {grade_key(g): histogram[g] for g in sorted(histogram)},
                 "expected_answers_unused": with_answers}
        return text, stats

    def _scores(
        self, queries: Sequence[QueryExample], rows: RetrievedRows, text: dict[int, TextJudgments]
    ) -> dict[str, np.ndarray]:
        """Each metric's per-query values, computed chunk by chunk so the arrays stay bounded."""
        any_match = self.matching == "any_match"
        total = len(queries)
        progress = after_a_while(self.progress)  # a bar only when the metrics take more than a moment

        def batches() -> Iterator[Any]:  # each chunk counted as done when the executor asks for the next
            for start in range(0, total, _CHUNK):
                progress("metrics", start, total)
                batch = rows.batch(queries, start, min(start + _CHUNK, total), text, any_match)
                if self._level is not None:  # set before any derived array is computed (they are lazy)
                    batch.relevance_level = self._level
                yield batch
            progress("metrics", total, total)

        # err's default max_grade: the highest grade judged over every query, resolved before the chunks
        metrics = resolve_judged_defaults(self.metrics, lambda: (
            (q.query_id, text[i].assignment.relevance if i in text else q.relevance) for i, q in enumerate(queries)))
        with plugin_exits_as_errors():  # a plugin's sys.exit() in the stage is its PluginError
            return self.executor.metrics(metrics, batches())

    def _report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)
