"""Every retrieve hop as one query of one evaluator run (issue 36): hop labels win over the trace's, expected
answers go through the judge, ids are ids, rerank and unlabelled hops are not queries."""

from __future__ import annotations

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.traces import Hop, Retrieved, TraceRecord
from evret_core.traces.hops import evaluate_hops, hop_query_id, plan_hops

D = {"d1": "Paris is the capital of France.", "d2": "Berlin is in Germany.", "d3": "Lyon is a French city."}


def _docs(*ids: str) -> tuple[Retrieved, ...]:
    return tuple(Retrieved(i, D[i]) for i in ids)


def test_hop_labels_win_over_the_trace_labels_and_texts_go_through_the_judge() -> None:
    trace = TraceRecord("t", expected_answers=(("Paris",),), hops=(
        Hop("capital of France", retrieved=_docs("d2", "d1")),  # trace labels: the judge finds Paris in d1
        Hop("German city", retrieved=_docs("d1", "d3"), relevant_doc_ids=("d2",)),  # its own ids: not found
        Hop("rerank", retrieved=_docs("d1"), kind="rerank"),
    ))
    plan = plan_hops([trace])
    assert plan.query_of == {(0, 0): "t#1", (0, 1): "t#2"} and plan.own_labels == {(0, 0): False, (0, 1): True}
    results = evaluate_hops(plan, ["recall@2", "mrr@2"], k=2, n_resamples=10)
    assert results is not None
    first, second = results.per_query["t#1"], results.per_query["t#2"]
    assert first.scores == {"recall@2": 1.0, "mrr@2": 0.5} and first.labelled_by == "text"
    assert second.scores == {"recall@2": 0.0, "mrr@2": 0.0} and second.relevant_ids == {"d2": 1.0}
    assert first.query_text == "capital of France"


def test_the_ranking_is_the_order_the_agent_saw_whatever_its_scores() -> None:
    trace = TraceRecord("t", relevant_doc_ids=("d3",), hops=(
        Hop("q", retrieved=(Retrieved("d1", None, 0.1), Retrieved("d3", None, 0.9))),))
    results = evaluate_hops(plan_hops([trace]), ["mrr@2"], k=2, n_resamples=10)
    assert results is not None and results.per_query["t#1"].scores["mrr@2"] == 0.5


def test_unlabelled_hops_are_not_queries_and_no_labels_means_no_run() -> None:
    plan = plan_hops([TraceRecord("t", hops=(Hop("q", retrieved=_docs("d1")),))])
    assert plan.query_of == {} and evaluate_hops(plan, ["recall@1"], k=1) is None


def test_a_text_labelled_hop_without_texts_is_refused_before_judging() -> None:
    trace = TraceRecord("t", expected_answers=(("Paris",),), hops=(Hop("q", retrieved=(Retrieved("d9"),)),))
    with pytest.raises(EvretError, match=r"trace 't' hops\[0\]\.retrieved\[0\]: document 'd9' has no text.*--corpus"):
        plan_hops([trace])
    # labelled by ids, a hop needs no text
    assert plan_hops([TraceRecord("t", relevant_doc_ids=("d9",), hops=trace.hops)]).query_of == {(0, 0): "t#1"}


def test_query_ids_are_unique_whatever_the_trace_ids() -> None:
    assert hop_query_id("a#1", 2) != hop_query_id("a", 12) and hop_query_id("a#1", 2) == "a#1#2"
