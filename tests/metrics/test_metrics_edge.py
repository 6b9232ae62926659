"""Edge cases of the metrics engine, hand-computed values for the measures trec_eval lacks, and TREC file I/O."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evret_core import (
    EvretError,
    create_metric,
    evaluate_rankings,
    evaluate_run,
    read_qrels,
    read_run,
    write_run,
)
from evret_core.contracts.metric import RankedBatch
from evret_core.metrics.ir import ALL_METRICS
from evret_core.plugins.loading import get_registry

ALL = ["precision@5", "recall@5", "f1@5", "hit_rate@5", "mrr@5", "mrr", "ndcg@5", "ndcg", "ap@5", "ap",
       "r_precision", "bpref", "err@5", "rbp", "rbp_residual", "num_rel_ret", "num_rel", "num_ret"]


@pytest.fixture
def both_paths(engine_path: object) -> None:
    """Every way of ranking a dict run: the compiled reader (scan, sort) and the numpy path (sorting, comparing)."""


def test_every_family_is_registered_through_the_hook() -> None:
    registered = set(get_registry().names("metric"))
    assert set(ALL_METRICS) <= registered
    for name in ALL:
        assert create_metric(name).name == name


def test_query_without_relevant_documents_scores_zero_and_counts(both_paths: None) -> None:
    qrels = {"q1": {"a": 1}, "q2": {"x": 0, "y": 0}}
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"x": 3.0, "z": 1.0}}
    per_query = evaluate_run(qrels, run, ALL, per_query=True)
    assert all(v == 0.0 for k, v in per_query["q2"].items() if k not in ("num_ret", "rbp_residual"))
    assert per_query["q2"]["num_ret"] == 2
    means = evaluate_run(qrels, run, ["mrr", "ap"])
    assert means == {"mrr": 0.5, "ap": 0.5}  # q2 counts in the mean


def test_run_shorter_than_k(both_paths: None) -> None:
    qrels = {"q": {"a": 1, "b": 1, "c": 1, "z": 1}}
    run = {"q": {"a": 0.9, "x": 0.8, "b": 0.7}}
    got = evaluate_run(qrels, run, ["precision@10", "recall@10", "ap@10", "hit_rate@10", "ndcg@10", "f1@10"])
    assert got["precision@10"] == pytest.approx(2 / 10)  # P_k divides by k
    assert got["recall@10"] == pytest.approx(2 / 4)
    assert got["ap@10"] == pytest.approx((1 / 1 + 2 / 3) / 4)  # map_cut divides by all relevant
    assert got["hit_rate@10"] == 1.0
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)
    assert got["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / idcg)
    assert got["f1@10"] == pytest.approx(2 * 0.2 * 0.5 / 0.7)


def test_all_tied_scores_rank_by_document_id_descending(both_paths: None) -> None:
    qrels = {"q": {"doc10": 1, "doc2": 2}}
    run = {"q": {"doc1": 1.0, "doc10": 1.0, "doc2": 1.0, "doc3": 1.0}}
    # string order descending: doc3, doc2, doc10, doc1
    got = evaluate_run(qrels, run, ["mrr", "precision@1", "precision@2", "ap", "ndcg"], per_query=True)["q"]
    assert got["mrr"] == 0.5
    assert got["precision@2"] == 0.5 and got["precision@1"] == 0.0
    assert got["ap"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert got["ndcg"] == pytest.approx((2 / math.log2(3) + 1 / 2) / (2 + 1 / math.log2(3)))
    # the same run listed in another dict order gives the same values
    shuffled = {"q": dict(reversed(list(run["q"].items())))}
    assert evaluate_run(qrels, shuffled, ["mrr", "ap", "ndcg"], per_query=True)["q"]["ap"] == got["ap"]


def test_partial_ties_with_negative_and_infinite_scores(both_paths: None) -> None:
    qrels = {"q": {"b": 1, "e": 1}}
    run = {"q": {"a": -math.inf, "b": -math.inf, "c": 5.0, "d": 5.0, "e": 5.0, "f": -1.0}}
    # order: e, d, c (tie, ids descending), f, b, a
    got = evaluate_run(qrels, run, ["ap", "mrr"], per_query=True)["q"]
    assert got["mrr"] == 1.0
    assert got["ap"] == pytest.approx((1 + 2 / 5) / 2)


def test_duplicate_documents_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"query q7: document 'd1' is ranked more than once"):
        evaluate_rankings({"q7": {"d1": 1}}, {"q7": ["d1", "d2", "d1"]}, ["ap"])
    path = tmp_path / "run.txt"
    path.write_text("q7 Q0 d1 1 2.0 t\nq7 Q0 d2 2 1.0 t\nq7 Q0 d1 3 0.5 t\n")
    with pytest.raises(EvretError, match=r"run.txt:3: query q7: document 'd1' is ranked twice \(first on line 1\)"):
        read_run(path)


def test_duplicates_count_once_for_the_retrieval_evaluator() -> None:
    # first_match mode ranks the same answer id twice: later copies are not relevant again
    batch = RankedBatch.from_rankings([["ans0", "x", "ans0"]], [{"ans0": 1}])
    assert create_metric("precision@3").compute(batch)[0] == pytest.approx(1 / 3)
    assert create_metric("mrr").score(["x", "ans0", "ans0"], ["ans0"]) == 0.5


def test_empty_run_and_disjoint_query_sets(both_paths: None) -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    with pytest.raises(EvretError, match="share no query id"):
        evaluate_run(qrels, {}, ["ap"])
    with pytest.raises(EvretError, match="share no query id"):
        evaluate_run(qrels, {"other": {"a": 1.0}}, ["ap"])
    assert evaluate_run(qrels, {"other": {"a": 1.0}}, ["ap", "num_ret"], complete=True) == {"ap": 0.0, "num_ret": 0.0}
    # a query present with no documents
    got = evaluate_run(qrels, {"q1": {}}, ALL, per_query=True)
    assert list(got) == ["q1"] and got["q1"]["num_rel"] == 1
    assert all(v == 0.0 for k, v in got["q1"].items() if k != "num_rel")


def test_complete_scores_missing_queries_as_zero(both_paths: None) -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = {"q1": {"a": 1.0}, "unjudged": {"a": 1.0}}
    assert evaluate_run(qrels, run, ["mrr"]) == {"mrr": 1.0}  # only judged queries of the run
    assert evaluate_run(qrels, run, ["mrr"], complete=True) == {"mrr": 0.5}
    assert set(evaluate_run(qrels, run, ["mrr"], per_query=True, complete=True)) == {"q1", "q2"}


def test_relevance_level_keeps_graded_gain_for_ndcg(both_paths: None) -> None:
    qrels = {"q": {"a": 1, "b": 2, "c": 3}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    got = evaluate_run(qrels, run, ["precision@3", "num_rel", "bpref", "ndcg"], per_query=True,
                       relevance_level=2)["q"]
    assert got["precision@3"] == pytest.approx(2 / 3)
    assert got["num_rel"] == 2
    # bpref: R=2, N=1 (grade 1 is judged non-relevant); both relevant docs are below it
    assert got["bpref"] == pytest.approx(((1 - 1 / 1) + (1 - 1 / 1)) / 2)
    dcg = 1 + 2 / math.log2(3) + 3 / 2
    idcg = 3 + 2 / math.log2(3) + 1 / 2
    assert got["ndcg"] == pytest.approx(dcg / idcg)


def test_exponential_gain_ndcg(both_paths: None) -> None:
    metric = create_metric("ndcg@2", gain="exponential")
    value = metric.score(["a", "b"], {"a": 1, "b": 3})
    assert value == pytest.approx((1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3)))
    # the name carries the non-default option, so a linear and an exponential ndcg@2 can be reported side by side
    assert metric.name == "ndcg@2(gain=exponential)"
    both = evaluate_run({"q": {"a": 1, "b": 3}}, {"q": {"a": 2.0, "b": 1.0}}, [metric, "ndcg@2"])
    assert both["ndcg@2(gain=exponential)"] == value
    assert both["ndcg@2"] == pytest.approx((3 / math.log2(3) + 1) / (3 + 1 / math.log2(3)))


def test_metric_names_carry_options_and_rebuild_the_metric() -> None:
    for spec in ("ndcg@10(gain=exponential)", "rbp(p=0.5)", "err@5(max_grade=3)", "ndcg@10", "rbp", "recall@100"):
        metric = create_metric(spec)
        assert metric.name == spec
        assert create_metric(metric.name).config() == metric.config()
    assert create_metric("rbp(p=0.5)").p == 0.5
    assert create_metric("ndcg@10(gain=exponential)", gain="linear").name == "ndcg@10"  # keywords win
    with pytest.raises(EvretError, match=r"write each option as KEY=VALUE"):
        create_metric("ndcg@10(gain)")
    with pytest.raises(EvretError, match="gain must be 'linear' or 'exponential', got 'cubic'"):
        create_metric("ndcg@10(gain=cubic)")


def test_mrr_cutoff() -> None:
    assert create_metric("mrr@2").score(["x", "y", "a"], ["a"]) == 0.0
    assert create_metric("mrr").score(["x", "y", "a"], ["a"]) == pytest.approx(1 / 3)


def test_err_hand_computed() -> None:
    # grades 2, 0, 1 with max grade 2: R = 3/4, 0, 1/4
    got = create_metric("err@3").score(["a", "b", "c"], {"a": 2, "c": 1, "z": 2})
    assert got == pytest.approx(3 / 4 + (1 / 4) * (1 / 4) / 3)
    assert create_metric("err@1").score(["a", "b", "c"], {"a": 2, "c": 1}) == pytest.approx(3 / 4)
    assert create_metric("err@3", max_grade=3).score(["c"], {"c": 1}) == pytest.approx(1 / 8)


def test_rbp_and_residual_hand_computed() -> None:
    p = 0.5
    rbp = create_metric("rbp", p=p)
    resid = create_metric("rbp_residual", p=p)
    assert rbp.name == "rbp(p=0.5)"
    ranking, qrels = ["a", "u", "b"], {"a": 1, "b": 0}  # u is unjudged
    assert rbp.score(ranking, qrels) == pytest.approx((1 - p) * 1)
    # unjudged rank 2 could add (1-p)p; the ranks past 3 could add p^3
    assert resid.score(ranking, qrels) == pytest.approx((1 - p) * p + p**3)
    # graded: gains scaled by the query's top grade (trec_eval), default p = 0.9
    assert create_metric("rbp").score(["a", "b"], {"a": 3, "b": 1}) == pytest.approx(0.1 * (1 + 0.9 / 3))


def test_nan_and_non_numeric_scores_are_rejected(both_paths: None) -> None:
    with pytest.raises(EvretError, match="query q: document 'a' has a NaN score"):
        evaluate_run({"q": {"a": 1}}, {"q": {"a": float("nan")}}, ["ap"])
    with pytest.raises(EvretError, match="query q: document 'b' has a non-numeric score 'high'"):
        evaluate_run({"q": {"a": 1}}, {"q": {"a": 1.0, "b": "high"}}, ["ap"])  # type: ignore[dict-item]
    with pytest.raises(EvretError, match="qrels: query q: document 'b' has a non-numeric grade 'yes'"):
        evaluate_run({"q": {"a": 1, "b": "yes"}}, {"q": {"a": 1.0}}, ["ap"])  # type: ignore[dict-item]


def test_metric_names_and_options_errors() -> None:
    with pytest.raises(EvretError, match="takes no cutoff"):
        create_metric("bpref@10")
    with pytest.raises(EvretError, match="listed twice"):
        evaluate_run({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ap", "ap"])
    with pytest.raises(EvretError, match="persistence"):
        create_metric("rbp", p=1.5)


def test_read_qrels_and_run_formats(tmp_path: Path) -> None:
    qrels_path = tmp_path / "qrels"
    qrels_path.write_text("# a comment\n\nq1 0 doc#1 2\nq1\t0\tdoc:2/x 0\r\nq2 0 d 1\n")
    assert read_qrels(qrels_path) == {"q1": {"doc#1": 2.0, "doc:2/x": 0.0}, "q2": {"d": 1.0}}
    run_path = tmp_path / "run"
    run_path.write_text("q1 Q0 doc#1 1 1.5 tagA extra junk\nq1 Q0 doc:2/x 2 -3e2 tagA\n")
    run = read_run(run_path)
    assert run == {"q1": {"doc#1": 1.5, "doc:2/x": -300.0}} and run.tag == "tagA"


@pytest.mark.parametrize(
    ("reader", "text", "message"),
    [
        (read_qrels, "q1 0 d1 1\nq1 0 d2\n", r"qrels.txt:2: expected 4 fields"),
        (read_qrels, "q1 0 d1 yes\n", r"qrels.txt:1: grade 'yes' is not a number"),
        (read_qrels, "q1 0 d1 1\nq1 0 d1 0\n", r"qrels.txt:2: query q1: document 'd1' is judged twice"),
        (read_run, "q1 Q0 d1 1 2.0\n", r"qrels.txt:1: expected 6 fields"),
        (read_run, "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 abc t\n", r"qrels.txt:2: score 'abc' is not a number"),
        (read_run, "q1 Q0 d1 1 nan t\n", r"qrels.txt:1: score is NaN"),
    ],
)
def test_bad_files_name_file_and_line(tmp_path: Path, reader: object, text: str, message: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text(text)
    with pytest.raises(EvretError, match=message):
        reader(path)  # type: ignore[operator]
    with pytest.raises(EvretError, match="no such file"):
        reader(tmp_path / "missing")  # type: ignore[operator]


def test_write_run_round_trips_in_trec_eval_order(tmp_path: Path) -> None:
    run = {"q1": {"b": 1.0, "a": 1.0, "c": 0.1 + 0.2}, "q2": {"x#1": -1e-300}}
    path = tmp_path / "out.run"
    write_run(path, run, tag="mine")
    lines = path.read_text().splitlines()
    assert lines[0] == "q1 Q0 b 1 1.0 mine" and lines[1] == "q1 Q0 a 2 1.0 mine"
    assert lines[2].split()[4] == repr(0.1 + 0.2)
    back = read_run(path)
    assert back == run and back.tag == "mine"
    with pytest.raises(EvretError, match="whitespace"):
        write_run(path, {"q": {"a b": 1.0}})


def test_batch_from_arrays_matches_dict_path(both_paths: None) -> None:
    rng = np.random.default_rng(3)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 4)) for j in rng.choice(30, 8, replace=False)} for i in range(50)}
    run = {f"q{i}": {f"d{j}": float(rng.integers(0, 5)) for j in range(25)} for i in range(50)}
    from_dicts = evaluate_run(qrels, run, ALL, per_query=True)
    from evret_core.io.trec import ranked_docs

    from_lists = evaluate_rankings(qrels, {q: ranked_docs(s) for q, s in run.items()}, ALL, per_query=True)
    assert from_dicts == from_lists


class _Colliding(str):
    """A document id whose hash collides with every other: matching must fall back to string equality."""

    def __hash__(self) -> int:
        return 7


def test_ranked_lists_survive_hash_collisions() -> None:
    ranking = ["d3", "d1", "d2", "d5"]
    qrels = {"d1": 2.0, "d2": 0.0, "d4": 1.0}
    plain = RankedBatch.from_rankings([ranking], [qrels], duplicates="error")
    colliding = RankedBatch.from_rankings(
        [[_Colliding(d) for d in ranking]], [{_Colliding(d): g for d, g in qrels.items()}], duplicates="error"
    )
    np.testing.assert_array_equal(plain.grades, colliding.grades)
    with pytest.raises(EvretError, match="'d1' is ranked more than once"):
        RankedBatch.from_rankings([[_Colliding(d) for d in ["d1", "d2", "d1"]]], [{}], duplicates="error")


def test_ragged_rankings_and_depth() -> None:
    batch = RankedBatch.from_rankings([["a", "b", "c"], [], ["x"]], [{"c": 1}, {"a": 1}, {"x": 2}], depth=2)
    assert batch.grades.shape == (3, 2)
    assert batch.num_ret.tolist() == [3, 0, 1]
    assert create_metric("recall").compute(batch).tolist() == [0.0, 0.0, 1.0]  # c is past the depth
