"""Every retrieve hop of a set of agent traces as one query of one :class:`~evret_core.evaluation.evaluator.Evaluator`
run: the hops' retrieved lists are a precomputed run (texts included), the labels are the hop's own when it has
any, else its trace's (expected answers through the judge, ids as ids). A hop with no labels at all is unmeasured.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.evaluation.evaluator import EmptyRetrievalWarning, Evaluator
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.io.traces import DEFAULT_METRICS, TraceRecord, shown
from evret_core.results.evaluation import EvaluationResults

__all__ = ["DEFAULT_METRICS", "HopPlan", "evaluate_hops", "hop_query_id", "plan_hops"]


def hop_query_id(trace_id: str, number: int) -> str:
    """The query id of retrieve hop ``number`` (from 1) of a trace: ``trace_id#number`` (unique, since the part after
    the last ``#`` is the number)."""
    return f"{trace_id}#{number}"


@dataclass
class HopPlan:
    """The hops as a dataset and a precomputed run, and which hop is which query (``(trace index, hop index)`` ->
    query id, for the measured hops only)."""

    dataset: EvaluationDataset
    run: dict[str, list[RetrievalResult]]
    query_of: dict[tuple[int, int], str]
    own_labels: dict[tuple[int, int], bool]

    def dataset_ids(self) -> list[str]:
        """The measured hops' query ids, in trace and hop order."""
        return [q.query_id for q in self.dataset.queries]


def plan_hops(traces: Sequence[TraceRecord]) -> HopPlan:
    """The dataset and run of the retrieve hops of ``traces``; a text-labelled hop whose documents have no text is
    an error naming the trace and the hop (give ``--corpus``), before any judging."""
    queries: list[QueryExample] = []
    run: dict[str, list[RetrievalResult]] = {}
    query_of: dict[tuple[int, int], str] = {}
    own: dict[tuple[int, int], bool] = {}
    for t, trace in enumerate(traces):
        number = 0
        for h, hop in enumerate(trace.hops):
            if hop.kind != "retrieve":
                continue
            number += 1
            own[(t, h)] = hop.labelled
            ids, answers = (hop.relevant_doc_ids, hop.expected_answers) if hop.labelled else (
                trace.relevant_doc_ids, trace.expected_answers)
            if ids is None and answers is None:
                continue
            if ids is None:
                for j, doc in enumerate(hop.retrieved):
                    if doc.text is None:
                        raise EvretError(f"trace {shown(trace.trace_id)} hops[{h}].retrieved[{j}]: document "
                                         f"{shown(doc.id)} has no text, and the hop is labelled by expected answers: "
                                         f"give --corpus (the texts by id)")
            qid = hop_query_id(trace.trace_id, number)
            record: dict[str, Any] = {"query_id": qid, "query_text": hop.query, "tags": dict(trace.tags)}
            if ids is not None:
                record["relevant_doc_ids"] = list(ids)
            else:
                assert answers is not None
                record["expected_answers"] = [list(a) for a in answers]
            try:
                queries.append(QueryExample.model_validate(record))
            except ValueError as exc:
                raise EvretError(f"trace {shown(trace.trace_id)} hops[{h}]: {str(exc).splitlines()[-1].strip()}"
                                 ) from None
            # scores by rank: the order the agent saw is the ranking (a tool's own scores may be distances, or tie)
            run[qid] = [RetrievalResult(doc_id=d.id, score=float(len(hop.retrieved) - r),
                                        metadata={} if d.text is None else {"text": d.text})
                        for r, d in enumerate(hop.retrieved)]
            query_of[(t, h)] = qid
    return HopPlan(EvaluationDataset(queries=queries, name="traces"), run, query_of, own)


def evaluate_hops(plan: HopPlan, metrics: Sequence[str], k: int, judge: Any = None,
                  judge_options: dict[str, Any] | None = None, executor: Any = None,
                  executor_options: dict[str, Any] | None = None, seed: int = 0, n_resamples: int = 1000,
                  confidence_level: float = 0.95,
                  progress: Callable[[str, int, int], None] | None = None) -> EvaluationResults | None:
    """One evaluator run over every measured hop (None when no hop is measured)."""
    if not plan.dataset.queries:
        return None
    evaluator = Evaluator(plan.run, list(metrics), judge=judge, judge_options=judge_options, k=k, seed=seed,
                          n_resamples=n_resamples, confidence_level=confidence_level, executor=executor,
                          executor_options=executor_options, progress=progress)
    with warnings.catch_warnings():
        # a trace set whose hops retrieved nothing is reported by its outcomes, not by a retriever warning
        warnings.simplefilter("ignore", EmptyRetrievalWarning)
        return evaluator.evaluate(plan.dataset)

