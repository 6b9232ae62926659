"""Each trace's outcome, found_at_hop and first_lost_hop, and the aggregates over traces (issue 36), on crafted
traces whose answers are known."""

from __future__ import annotations

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.traces import Hop, Retrieved, TraceRecord
from evret_core.judge.lexical import ContainsJudge
from evret_core.results.trace_results import derive_outcome
from evret_core.traces.outcomes import answers_right, evaluate_traces

GOLD = Retrieved("g", "The bridge was designed by Ilse Brandt.")
OTHER = Retrieved("o", "The market opens on Thursday.")
ANSWERS = (("Ilse Brandt",),)


def _trace(tid: str, hops: tuple[Hop, ...], answer: str | None = "Ilse Brandt designed it.",
           **labels: object) -> TraceRecord:
    return TraceRecord(tid, hops=hops, question="Who designed the bridge?", answer=answer,
                       expected_answers=labels.get("expected_answers", ANSWERS),  # type: ignore[arg-type]
                       tags={"agent": str(labels.get("agent", "a"))})


def _hop(*docs: Retrieved, own: tuple[str, ...] | None = None) -> Hop:
    return Hop("bridge designer", retrieved=docs, relevant_doc_ids=own)


CASES = {
    "right": _trace("right", (_hop(OTHER), _hop(GOLD))),
    "never_found": _trace("never", (_hop(OTHER), _hop(OTHER)), answer="Otto Weil."),
    "found_not_used": _trace("notused", (_hop(GOLD), _hop(OTHER)), answer="Otto Weil."),
    "lost_at_hop": _trace("lost", (_hop(GOLD, own=("g",)), _hop(OTHER, own=("g2",)), _hop(GOLD, own=("g",))),
                          answer="Otto Weil."),
    "no_retrieval": _trace("none", ()),
    "unmeasured": _trace("unlabelled", (_hop(GOLD),), expected_answers=None),
}


def test_each_outcome_on_a_crafted_trace() -> None:
    results = evaluate_traces(list(CASES.values()), ["recall@3"], k=3, n_resamples=20)
    got = {tid: (t.outcome, t.found_at_hop, t.first_lost_hop) for tid, t in results.per_trace.items()}
    assert got == {"right": ("right", 2, None), "never": ("never_found", None, 2),
                   "notused": ("found_not_used", 1, None), "lost": ("lost_at_hop", 1, 2),
                   "none": ("no_retrieval", None, None), "unlabelled": ("unmeasured", None, None)}
    assert results.outcomes == dict.fromkeys(results.outcomes, 1)
    assert results.first_lost_hop == {"2": 2}
    # hops per success: the one right trace took 2 hops; per trace: (2+2+2+3+0+1)/6; to gold: (2+1+1)/3
    assert results.hops_per_success == 2.0
    assert results.hops_per_trace == pytest.approx(10 / 6, abs=1e-12)
    assert results.hops_to_gold == pytest.approx(4 / 3, abs=1e-12)
    low, high = results.hop_intervals["hops_per_trace"]
    assert 0.0 <= low <= 10 / 6 <= high <= 3.0 and results.hop_intervals["hops_per_success"] == [2.0, 2.0]


def test_per_hop_index_means_and_the_all_hops_mean_come_from_the_hops() -> None:
    results = evaluate_traces(list(CASES.values()), ["recall@3"], k=3, n_resamples=20)
    # hop 1 of the measured traces: right 0, never 0, notused 1, lost 1 (own), unlabelled: not measured
    assert results.by_hop_index["1"]["n"] == 4 and results.by_hop_index["1"]["scores"]["recall@3"] == 0.5
    assert results.by_hop_index["3"] == {"n": 1, "scores": {"recall@3": 1.0}, "intervals": {"recall@3": [1.0, 1.0]}}
    low, high = results.by_hop_index["1"]["intervals"]["recall@3"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0
    values = [q.scores["recall@3"] for q in results.queries.values()]
    assert len(values) == 9 and results.scores["recall@3"] == pytest.approx(sum(values) / 9, abs=1e-12)


def test_slices_by_tag_count_outcomes_and_average_hops() -> None:
    traces = [_trace("x", (_hop(GOLD),), agent="v1"), _trace("y", (_hop(OTHER),), answer="No.", agent="v2")]
    slices = evaluate_traces(traces, ["recall@1"], k=1, n_resamples=10).slices
    assert slices["agent"]["v1"] == {"n": 1, "outcomes": {"right": 1, "never_found": 0, "found_not_used": 0,
                                                          "lost_at_hop": 0, "no_retrieval": 0, "unmeasured": 0},
                                     "scores": {"recall@1": 1.0}}
    assert slices["agent"]["v2"]["outcomes"]["never_found"] == 1


def test_with_trace_labels_only_the_last_hop_is_where_it_was_lost() -> None:
    assert derive_outcome([False, False, False], [False] * 3, False) == ("never_found", None, 3)
    assert derive_outcome([False, True], [False, False], False) == ("found_not_used", 2, None)
    # hop labels: the first own-labelled hop that missed, even when a later hop found it
    assert derive_outcome([True, False, True], [True, True, True], None) == ("lost_at_hop", 1, 2)
    assert derive_outcome([None, None], [False, False], True) == ("unmeasured", None, None)
    assert derive_outcome([True], [False], None) == ("unmeasured", 1, None)


def test_the_answer_is_right_when_it_states_every_expected_answer() -> None:
    both = _trace("b", (), answer="Ilse Brandt and Otto Weil.", expected_answers=(("Ilse Brandt",), ("Otto Weil",)))
    one = _trace("o", (), answer="Ilse Brandt.", expected_answers=(("Ilse Brandt",), ("Otto Weil",)))
    alias = _trace("a", (), answer="I. Brandt did.", expected_answers=(("Ilse Brandt", "I. Brandt"),))
    assert answers_right([both, one, alias, _trace("n", (), answer=None)]) == [True, False, True, None]
    assert answers_right([both, one, alias], answer_judge=ContainsJudge()) == [True, False, True]


def test_all_hops_intervals_resample_traces_with_their_hops() -> None:
    """The all-hops mean's interval is the cluster bootstrap over traces (a trace's hops move together), and a
    file whose intervals name a metric without a score is refused."""
    import numpy as np

    from evret_core.results.trace_results import TraceResults, check_trace_results
    from evret_core.statistics.clustered import cluster_bootstrap_intervals, number_clusters

    traces = [TraceRecord(trace_id=f"t{i}", question="q", answer="a",
                          hops=(Hop(query="x", retrieved=tuple(Retrieved(d, f"text of {d}") for d in ranked),
                                    relevant_doc_ids=("g",)),
                                Hop(query="y", retrieved=tuple(Retrieved(d, f"text of {d}") for d in ranked2),
                                    relevant_doc_ids=("g",))))
              for i, (ranked, ranked2) in enumerate([(("g", "b"), ("g",)), (("b", "c"), ("b", "g")),
                                                     (("c",), ("c", "b")), (("g",), ("b", "c"))])]
    results = evaluate_traces(traces, ["recall@1"], k=2, n_resamples=200, seed=3)
    rows = [(tid, results.queries[h.query_id].scores["recall@1"]) for tid, t in results.per_trace.items()
            for h in t.hops if h.query_id is not None]
    clusters, _ = number_clusters([tid for tid, _ in rows])
    expected = cluster_bootstrap_intervals({"recall@1": np.array([v for _, v in rows])}, clusters, 0.95, 200, 3)
    assert results.intervals == expected
    low, high = results.intervals["recall@1"]
    assert low <= results.scores["recall@1"] <= high
    tampered = results.model_copy(update={"intervals": {"ndcg@3": [0.0, 1.0]}})
    with pytest.raises(EvretError, match="intervals holds 'ndcg@3', which has no score"):
        check_trace_results(tampered, "r.json")
    assert isinstance(results, TraceResults)
