"""The retrieval evaluator: retrieve, judge, assign ids, compute metrics.

Matching modes (how judgments become id sets):

- ``first_match`` (default): each expected answer is one relevant item. Going down the ranking, a retrieved
  document takes the id of the first expected answer (in dataset order) that it matches and that no higher-ranked
  document took; a document matching none keeps its own id and is not relevant. A document whose every matched
  answer is already taken is a repeat and is not relevant again (trec_eval counts each relevant document once).
  Recall is the share of expected answers found; precision the share of retrieved documents that found a new
  answer.
- ``any_match``: every retrieved document that matches any expected answer is relevant (precision counts each
  one), and recall@k is the share of expected answers matched by at least one document in the top k. For the
  rank-based measures (MRR, nDCG, AP) the number of relevant items is the larger of the number of expected
  answers and the number of matching documents retrieved, so that no score exceeds 1.

A query with ``relevant_doc_ids`` is scored on ids (graded when grades are given), without judging.

Judgments that could not be made (``None`` from a judge, e.g. an LLM call that failed after every retry) are
reported per query and in ``stats["unmeasured"]``; in the metrics they count as not matching. Pass
``fail_on_unmeasured=True`` to fail the run instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from evret_core.errors import EvretError
from evret_core.judges.base import resolve_judge
from evret_core.metrics.base import Metric, RankedBatch
from evret_core.models import EvaluationDataset, JudgmentContext, QueryExample, RetrievalResult
from evret_core.results import EvaluationResults, Judgment, QueryResult, add_statistics
from evret_core.retrievers import PrecomputedRetriever, call_batch_retrieve, coerce_results, resolve_retriever

MATCHING_MODES = ("first_match", "any_match")
DEFAULT_DEPTH = 100


def answer_id(index: int) -> str:
    """The id an expected answer scores as in ``first_match`` mode."""
    return f"answer:{index}"


class UnmeasuredJudgmentsError(EvretError):
    """Raised with ``fail_on_unmeasured=True`` when some judgments could not be made."""


class Evaluator:
    """Scores a retriever on a dataset.

    :param retriever: an Evret retriever, a function ``(query, k)``, a precomputed run ``{query_id: results}``, or
        any object an installed plugin can adapt (a LangChain retriever with evret-langchain).
    :param metrics: metric names (``"ndcg@10"``) or :class:`~evret_core.metrics.Metric` objects.
    :param judge: a judge object or a registered judge name; needed when the dataset has text labels
        (default: :data:`~evret_core.judges.DEFAULT_JUDGE`, ``contains``).
    :param matching: ``first_match`` or ``any_match`` (see the module docs).
    :param k: how many documents to retrieve; default the largest metric cutoff (100 when no metric has one).
    :param fail_on_unmeasured: raise :class:`UnmeasuredJudgmentsError` when a judgment could not be made.
    :param progress: called as ``progress(stage, done, total)`` while retrieving and judging.
    :param batch_size: queries per ``batch_retrieve`` call.
    :param judge_batch_size: contexts per ``batch_judge`` call (progress is reported between calls; the judge's
        ``prepare`` sees every context first, so per-text work such as embedding is still done in one pass).
    :param confidence_level, n_resamples, seed: the percentile bootstrap intervals of the means (and slices).
    :param min_slice_size: slices (queries sharing a tag value) smaller than this are flagged ``small``.
    """

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
    ) -> None:
        from evret_core.registry import create_metric

        if not metrics:
            raise EvretError("no metrics given: name at least one, e.g. recall@10")
        self.metrics: list[Metric] = [m if isinstance(m, Metric) else create_metric(m) for m in metrics]
        names = [m.name for m in self.metrics]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise EvretError(f"metric(s) given twice: {', '.join(duplicates)}")
        if matching not in MATCHING_MODES:
            raise EvretError(f"unknown matching mode {matching!r}; use one of {', '.join(MATCHING_MODES)}")
        self.matching = matching
        self.retriever = resolve_retriever(retriever)
        self.judge = resolve_judge(judge) if isinstance(judge, str) else judge
        depths = [m.depth for m in self.metrics if m.depth is not None]
        if k is not None and int(k) <= 0:
            raise EvretError(f"k must be a positive integer, got {k}")
        self.k = int(k) if k is not None else (max(depths) if depths else DEFAULT_DEPTH)
        self.fail_on_unmeasured = fail_on_unmeasured
        self.progress = progress
        self.batch_size = max(1, int(batch_size))
        self.judge_batch_size = max(1, int(judge_batch_size))
        from evret_core.stats import check_confidence_level, check_resamples

        self.confidence_level = check_confidence_level(confidence_level)
        self.n_resamples = check_resamples(n_resamples)
        self.seed = int(seed)
        self.min_slice_size = int(min_slice_size)

    # -- pipeline ----------------------------------------------------------------------------------------------
    def retrieve(self, dataset: EvaluationDataset) -> list[list[RetrievalResult]]:
        """Ranked results for every query of ``dataset``, cut to ``k``."""
        queries = dataset.queries
        if isinstance(self.retriever, PrecomputedRetriever):
            return [self.retriever.results_for(q.query_id, self.k) for q in queries]
        out: list[list[RetrievalResult]] = []
        for start in range(0, len(queries), self.batch_size):
            chunk = queries[start : start + self.batch_size]
            batch = call_batch_retrieve(self.retriever, [q.query_text for q in chunk], self.k)
            if len(batch) != len(chunk):
                raise EvretError(
                    f"retriever {type(self.retriever).__name__} returned {len(batch)} result lists for "
                    f"{len(chunk)} queries"
                )
            where = f"retriever {type(self.retriever).__name__}"
            out.extend(
                coerce_results(results, f"{where}, query {q.query_id!r}")[: self.k]
                for q, results in zip(chunk, batch, strict=True)
            )
            self._report("retrieve", len(out), len(queries))
        return out

    def plan_judgments(
        self, dataset: EvaluationDataset, retrieved: Sequence[Sequence[RetrievalResult]]
    ) -> list[JudgmentContext]:
        """The distinct judgment contexts the text-labelled queries need, in first-seen order."""
        seen: dict[JudgmentContext, None] = {}
        for example, results in zip(dataset.queries, retrieved, strict=True):
            if example.is_id_labelled:
                continue
            for rank, result in enumerate(results, start=1):
                text = result.text
                if text is None:
                    raise EvretError(
                        f"query {example.query_id!r}: retrieved document {result.doc_id!r} (rank {rank}) has no "
                        f"text (metadata['text']); text-labelled queries need the retrieved texts to judge"
                    )
                for j in range(len(example.expected_answers)):
                    seen.setdefault(example.judgment_context(j, text), None)
        return list(seen)

    def run_judge(self, contexts: Sequence[JudgmentContext]) -> dict[JudgmentContext, bool | None]:
        if not contexts:
            return {}
        if self.judge is None:
            self.judge = resolve_judge()
        reset_stats = getattr(self.judge, "reset_stats", None)
        if callable(reset_stats):  # judges that count cost (LLMJudge) report per run
            reset_stats()
        prepare = getattr(self.judge, "prepare", None)
        if callable(prepare):  # e.g. encode every distinct text in one pass before chunked judging
            prepare(contexts)
        answers: list[bool | None] = []
        step = self.judge_batch_size
        for start in range(0, len(contexts), step):
            chunk = contexts[start : start + step]
            got = list(self.judge.batch_judge(chunk))
            if len(got) != len(chunk):
                raise EvretError(f"judge {self.judge!r} returned {len(got)} answers for {len(chunk)} contexts")
            answers.extend(None if a is None else bool(a) for a in got)
            self._report("judge", len(answers), len(contexts))
        return dict(zip(contexts, answers, strict=True))

    def evaluate(self, dataset: EvaluationDataset) -> EvaluationResults:
        """Retrieve, judge and score every query of ``dataset``."""
        if not isinstance(dataset, EvaluationDataset):
            raise EvretError(f"evaluate() needs an EvaluationDataset, got {type(dataset).__name__}")
        started = time.time()
        retrieved = self.retrieve(dataset)
        contexts = self.plan_judgments(dataset, retrieved)
        total_contexts = sum(
            len(r) * len(q.expected_answers) for q, r in zip(dataset.queries, retrieved, strict=True)
            if not q.is_id_labelled
        )
        verdicts = self.run_judge(contexts)
        per_query, rankings, qrels, coverage = self._assign(dataset, retrieved, verdicts)
        batch = RankedBatch.from_rankings(rankings, qrels)
        scores_matrix = {m.name: self._compute(m, batch, coverage) for m in self.metrics}
        for i, qr in enumerate(per_query):
            qr.scores = {name: float(values[i]) for name, values in scores_matrix.items()}
        means = {name: float(np.mean(values)) if len(values) else 0.0 for name, values in scores_matrix.items()}
        unmeasured_queries = [qr.query_id for qr in per_query if qr.unmeasured]
        unmeasured = sum(qr.unmeasured for qr in per_query)
        if unmeasured and self.fail_on_unmeasured:
            raise UnmeasuredJudgmentsError(
                f"{unmeasured} judgment(s) could not be made, touching {len(unmeasured_queries)} queries: "
                f"{', '.join(unmeasured_queries[:10])}{' ...' if len(unmeasured_queries) > 10 else ''}"
            )
        stats: dict[str, Any] = {
            "num_queries": len(per_query),
            "judgments": {
                "contexts": total_contexts,
                "unique": len(contexts),
                "unmeasured": sum(1 for v in verdicts.values() if v is None),
            },
            "unmeasured": {"judgments": unmeasured, "queries": unmeasured_queries,
                           "counted_as": "not matching"},
            "elapsed_s": round(time.time() - started, 6),
        }
        judge_stats = getattr(self.judge, "stats", None)
        if callable(judge_stats):
            stats["judge"] = judge_stats()
            for key in ("cost", "parsing"):  # LLM judges: calls, cache hits and tokens per provider; parse fallbacks
                if isinstance(stats["judge"], dict) and key in stats["judge"]:
                    stats[key] = stats["judge"][key]
        results = EvaluationResults(
            scores=means,
            metrics=[m.name for m in self.metrics],
            per_query={qr.query_id: qr for qr in per_query},
            config=self.config(),
            stats=stats,
        )
        return add_statistics(results, dataset, self.confidence_level, self.n_resamples, self.seed,
                              self.min_slice_size)

    def dry_run(self, dataset: EvaluationDataset) -> dict[str, Any]:
        """Retrieve and plan the judgments without judging: how many would be sent after dedupe and cache, and a
        token estimate when the judge can make one (``judge.plan``). Nothing is sent to an LLM."""
        if self.judge is None:
            self.judge = resolve_judge()
        retrieved = self.retrieve(dataset)
        contexts = self.plan_judgments(dataset, retrieved)
        plan = getattr(self.judge, "plan", None)
        if callable(plan):
            return dict(plan(contexts))
        return {"contexts": len(contexts), "unique": len(contexts), "cached": 0, "to_send": 0,
                "note": f"judge {getattr(self.judge, 'name', type(self.judge).__name__)!r} makes no API calls"}

    def config(self) -> dict[str, Any]:
        retriever_config = getattr(self.retriever, "config", None)
        judge_config = getattr(self.judge, "config", None)
        return {
            "retriever": retriever_config() if callable(retriever_config) else {"name": type(self.retriever).__name__},
            "judge": judge_config() if callable(judge_config) else (None if self.judge is None else repr(self.judge)),
            "metrics": [m.config() for m in self.metrics],
            "matching": self.matching,
            "k": self.k,
        }

    # -- assignment --------------------------------------------------------------------------------------------
    def _assign(
        self,
        dataset: EvaluationDataset,
        retrieved: Sequence[Sequence[RetrievalResult]],
        verdicts: dict[JudgmentContext, bool | None],
    ) -> tuple[list[QueryResult], list[list[str]], list[dict[str, float]], list[tuple[list[set[int]], int] | None]]:
        per_query: list[QueryResult] = []
        rankings: list[list[str]] = []
        qrels: list[dict[str, float]] = []
        coverage: list[tuple[list[set[int]], int] | None] = []
        for example, results in zip(dataset.queries, retrieved, strict=True):
            if example.is_id_labelled:
                qr, ranking, rel = self._assign_ids(example, results)
                cov = None
            else:
                qr, ranking, rel, cov = self._assign_text(example, results, verdicts)
            per_query.append(qr)
            rankings.append(ranking)
            qrels.append(rel)
            coverage.append(cov)
        return per_query, rankings, qrels, coverage

    def _assign_ids(
        self, example: QueryExample, results: Sequence[RetrievalResult]
    ) -> tuple[QueryResult, list[str], dict[str, float]]:
        relevance = example.relevance
        ranking = [r.doc_id for r in results]
        judgments = [
            Judgment(rank=i, doc_id=r.doc_id, score=r.score, text=r.text, assigned=r.doc_id)
            for i, r in enumerate(results, start=1)
        ]
        qr = QueryResult(query_id=example.query_id, query_text=example.query_text, scores={},
                         retrieved_ids=ranking, relevant_ids=relevance, judgments=judgments,
                         expected_answers=example.expected_answers, tags=example.tags, labelled_by="ids")
        return qr, ranking, relevance

    def _assign_text(
        self,
        example: QueryExample,
        results: Sequence[RetrievalResult],
        verdicts: dict[JudgmentContext, bool | None],
    ) -> tuple[QueryResult, list[str], dict[str, float], tuple[list[set[int]], int] | None]:
        answers = example.expected_answers
        judgments: list[Judgment] = []
        ranking: list[str] = []
        unmeasured = 0
        for rank, result in enumerate(results, start=1):
            text = result.text or ""
            matched: list[int] = []
            missing: list[int] = []
            for j in range(len(answers)):
                verdict = verdicts.get(example.judgment_context(j, text))
                if verdict is None:
                    missing.append(j)
                elif verdict:
                    matched.append(j)
            unmeasured += len(missing)
            judgments.append(Judgment(rank=rank, doc_id=result.doc_id, score=result.score, text=result.text,
                                      matched=matched, unmeasured=missing))
        if self.matching == "first_match":
            relevance = {answer_id(j): 1.0 for j in range(len(answers))}
            taken: set[int] = set()
            for judgment in judgments:
                if judgment.matched:
                    # the first answer it matches that no higher-ranked document took; if all are taken, a repeat
                    j = next((m for m in judgment.matched if m not in taken), judgment.matched[0])
                    taken.add(j)
                    judgment.assigned = answer_id(j)
                else:
                    judgment.assigned = judgment.doc_id
                ranking.append(judgment.assigned)
            cov = None
        else:
            matching_docs = [jd for jd in judgments if jd.matched]
            relevance = {}
            for jd in judgments:
                jd.assigned = jd.doc_id
                ranking.append(jd.doc_id)
                if jd.matched:
                    relevance[jd.doc_id] = 1.0
            for j in range(max(len(answers), len(matching_docs)) - len(relevance)):
                relevance[f"unretrieved:{j}"] = 1.0
            cov = ([set(jd.matched) for jd in judgments], len(answers))
        qr = QueryResult(query_id=example.query_id, query_text=example.query_text, scores={},
                         retrieved_ids=[r.doc_id for r in results], relevant_ids=relevance, judgments=judgments,
                         expected_answers=list(answers), tags=example.tags, labelled_by="text",
                         unmeasured=unmeasured)
        return qr, ranking, relevance, cov

    def _compute(self, metric: Metric, batch: RankedBatch, coverage: list[tuple[list[set[int]], int] | None]) -> np.ndarray:
        values = np.asarray(metric.compute(batch), dtype=np.float64)
        if self.matching == "any_match" and metric.family == "recall":
            # recall counts expected answers found, not matching documents
            values = values.copy()
            for q, cov in enumerate(coverage):
                if cov is None:
                    continue
                per_rank, n_answers = cov
                top = per_rank if metric.k is None else per_rank[: metric.k]
                found: set[int] = set().union(*top) if top else set()
                values[q] = len(found) / n_answers if n_answers else 0.0
        return values

    def _report(self, stage: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(stage, done, total)
