"""What became of each agent run, and the aggregates over runs: :func:`evaluate_traces` scores the hops
(:mod:`evret_core.traces.hops`), decides whether each final answer is right, derives each trace's outcome
(:func:`~evret_core.results.trace_results.derive_outcome`) and returns :class:`TraceResults`.

The final answer is right when it states every expected answer of the trace (each through any of its aliases) by
:func:`~evret_core.rag.scores.answers.answer_is_correct`, the RAG harness's ``correct``; or, with an answer judge,
when the judge matches every expected answer against the answer text.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.io.traces import TraceRecord
from evret_core.rag.scores.answers import answer_is_correct
from evret_core.results.trace_results import (
    OUTCOMES,
    HopRecord,
    TraceOutcome,
    TraceResults,
    derive_outcome,
    mean_or_none,
    trace_slices,
)
from evret_core.statistics.clustered import cluster_bootstrap_intervals, number_clusters
from evret_core.statistics.inference import bootstrap_interval
from evret_core.traces.hops import evaluate_hops, plan_hops

__all__ = ["answers_right", "evaluate_traces"]


def answers_right(traces: Sequence[TraceRecord], answer_judge: Any = None) -> list[bool | None]:
    """Per trace: whether its final answer states every expected answer (None: no answer or no expected answers).
    With ``answer_judge`` (an Evret judge), each expected answer is judged against the answer text in one batch."""
    out: list[bool | None] = []
    contexts: list[JudgmentContext] = []
    spans: list[tuple[int, int, int]] = []  # trace index, first context, context count
    for i, trace in enumerate(traces):
        if not trace.answer or not trace.expected_answers:
            out.append(None)
            continue
        if answer_judge is None:
            out.append(all(answer_is_correct(trace.answer, list(aliases), question=trace.question or "")
                           for aliases in trace.expected_answers))
            continue
        out.append(None)
        start = len(contexts)
        contexts.extend(JudgmentContext(query=trace.question or "", expected_text=aliases[0],
                                        retrieved_text=trace.answer, aliases=tuple(aliases))
                        for aliases in trace.expected_answers)
        spans.append((i, start, len(contexts) - start))
    if contexts:
        verdicts = list(answer_judge.batch_judge(contexts))
        if len(verdicts) != len(contexts):
            raise EvretError(f"answer judge returned {len(verdicts)} verdicts for {len(contexts)} answers")
        for i, start, count in spans:
            part = verdicts[start:start + count]
            out[i] = None if any(v is None for v in part) else all(bool(v) for v in part)
    return out


def _interval_of(values: Sequence[float], level: float, resamples: int, seed: int) -> list[float] | None:
    if not values:
        return None
    return list(bootstrap_interval(values, level, resamples, seed))


def _all_hops_intervals(hop_values: Mapping[str, Sequence[tuple[Any, dict[str, float]]]],
                        scores: dict[str, float], level: float, resamples: int,
                        seed: int) -> dict[str, list[float]]:
    """The interval of each all-hops mean: traces resampled with their hops (a trace's hops move together, so
    resampling hops alone would be too narrow), the ratio estimator of
    :func:`~evret_core.statistics.clustered.cluster_bootstrap_intervals`."""
    import numpy as np

    rows = [(tid, values) for tid, trace_rows in hop_values.items() for _n, values in trace_rows]
    if not rows or not scores:
        return {}
    clusters, _ = number_clusters([tid for tid, _ in rows])
    columns = {metric: np.array([values.get(metric, np.nan) for _, values in rows], dtype=np.float64)
               for metric in scores}
    return cluster_bootstrap_intervals(columns, clusters, level, resamples, seed)


def evaluate_traces(traces: Sequence[TraceRecord], metrics: Sequence[str], k: int, judge: Any = None,
                    judge_options: dict[str, Any] | None = None, answer_judge: Any = None,
                    executor: Any = None, executor_options: dict[str, Any] | None = None, seed: int = 0,
                    n_resamples: int = 1000, confidence_level: float = 0.95, config: dict[str, Any] | None = None,
                    progress: Callable[[str, int, int], None] | None = None) -> TraceResults:
    """Score every retrieve hop of ``traces`` in one evaluator run and derive each trace's outcome and the
    aggregates (see the module docs and ``docs/traces.md``)."""
    started = time.time()
    plan = plan_hops(traces)
    right = answers_right(traces, answer_judge)
    hop_results = evaluate_hops(plan, metrics, k, judge=judge, judge_options=judge_options, executor=executor,
                                executor_options=executor_options, seed=seed, n_resamples=n_resamples,
                                confidence_level=confidence_level, progress=progress)
    queries = {} if hop_results is None else {qid: hop_results.per_query[qid] for qid in plan.dataset_ids()}
    per_trace: dict[str, TraceOutcome] = {}
    for t, trace in enumerate(traces):
        hops: list[HopRecord] = []
        number = 0
        for h, hop in enumerate(trace.hops):
            if hop.kind != "retrieve":
                hops.append(HopRecord(query=hop.query, tool=hop.tool, kind=hop.kind))
                continue
            number += 1
            qid = plan.query_of.get((t, h))
            found = None if qid is None else any(g > 0 for g in queries[qid].gains[:k])
            hops.append(HopRecord(query=hop.query, tool=hop.tool, kind="retrieve", number=number, query_id=qid,
                                  own_labels=plan.own_labels[(t, h)], found=found))
        retrieve = [x for x in hops if x.kind == "retrieve"]
        outcome, found_at, lost = derive_outcome([x.found for x in retrieve], [x.own_labels for x in retrieve],
                                                 right[t])
        per_trace[trace.trace_id] = TraceOutcome(
            question=trace.question, answer=trace.answer, answer_right=right[t], outcome=outcome,
            found_at_hop=found_at, first_lost_hop=lost, tags=dict(trace.tags), hops=hops)
    names = [] if hop_results is None else list(hop_results.metrics)
    names = names or list(metrics)
    scores: dict[str, float] = {}
    for metric in names:
        values = [q.scores[metric] for q in queries.values() if metric in q.scores]
        if values:
            scores[metric] = math.fsum(values) / len(values)
    by_number: dict[int, list[dict[str, float]]] = {}
    for trace_outcome in per_trace.values():
        for hop_record in trace_outcome.hops:
            if hop_record.query_id is not None and hop_record.number is not None:
                by_number.setdefault(hop_record.number, []).append(queries[hop_record.query_id].scores)
    by_hop_index: dict[str, dict[str, Any]] = {}
    for number in sorted(by_number):
        rows = by_number[number]
        cell_scores: dict[str, float] = {}
        intervals: dict[str, list[float]] = {}
        for metric in names:
            values = [r[metric] for r in rows if metric in r]
            if values:
                cell_scores[metric] = math.fsum(values) / len(values)
                interval = _interval_of(values, confidence_level, n_resamples, seed)
                if interval is not None:
                    intervals[metric] = interval
        by_hop_index[str(number)] = {"n": len(rows), "scores": cell_scores, "intervals": intervals}
    outcomes = {name: sum(t.outcome == name for t in per_trace.values()) for name in OUTCOMES}
    lost_histogram: dict[str, int] = {}
    for trace_outcome in per_trace.values():
        if trace_outcome.first_lost_hop is not None:
            key = str(trace_outcome.first_lost_hop)
            lost_histogram[key] = lost_histogram.get(key, 0) + 1
    retrieve_hops = {tid: sum(h.kind == "retrieve" for h in t.hops) for tid, t in per_trace.items()}
    hop_values = {tid: [(h.number, queries[h.query_id].scores) for h in t.hops
                        if h.query_id is not None and h.number is not None] for tid, t in per_trace.items()}
    stats: dict[str, Any] = {
        "num_traces": len(traces), "num_hops": sum(retrieve_hops.values()), "measured_hops": len(queries),
        "rerank_hops": sum(h.kind == "rerank" for t in per_trace.values() for h in t.hops),
        "elapsed_s": round(time.time() - started, 6)}
    if hop_results is not None:
        for key in ("judgments", "unmeasured", "judge"):
            if key in hop_results.stats:
                stats[key] = hop_results.stats[key]
    hop_measures = {
        "hops_per_success": [float(retrieve_hops[tid]) for tid, t in per_trace.items() if t.outcome == "right"],
        "hops_per_trace": [float(n) for n in retrieve_hops.values()],
        "hops_to_gold": [float(t.found_at_hop) for t in per_trace.values() if t.found_at_hop is not None]}
    intervals = _all_hops_intervals(hop_values, scores, confidence_level, n_resamples, seed)
    hop_intervals = {name: interval for name, values in hop_measures.items()
                     if (interval := _interval_of(values, confidence_level, n_resamples, seed)) is not None}
    return TraceResults(
        metrics=names, k=k, confidence_level=confidence_level, scores=scores, intervals=intervals,
        by_hop_index=by_hop_index,
        outcomes=outcomes, first_lost_hop=dict(sorted(lost_histogram.items(), key=lambda kv: int(kv[0]))),
        hops_per_success=mean_or_none(hop_measures["hops_per_success"]),
        hops_per_trace=mean_or_none(hop_measures["hops_per_trace"]),
        hops_to_gold=mean_or_none(hop_measures["hops_to_gold"]), hop_intervals=hop_intervals,
        slices=trace_slices(per_trace, {tid: [(n, s) for n, s in v] for tid, v in hop_values.items() if v},
                            names),
        per_trace=per_trace, queries=queries, config=dict(config or {}), stats=stats)
