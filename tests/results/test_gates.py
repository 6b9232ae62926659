"""Regression gates: floors and baseline comparisons on real evaluations of the honeybee example."""

from __future__ import annotations

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.results.gates import check_fail_under, check_gates, check_regression, parse_fail_under


def test_parse_fail_under_reads_metric_value_pairs() -> None:
    assert parse_fail_under(["recall@5=0.8", "ndcg@10(gain=exponential)=0.5"]) == {
        "recall@5": 0.8, "ndcg@10(gain=exponential)": 0.5}


@pytest.mark.parametrize("spec", ["recall@5", "=0.8", "recall@5=high", "recall@5=nan", "recall@5=inf"])
def test_parse_fail_under_rejects_bad_specs_naming_the_option(spec: str) -> None:
    with pytest.raises(EvretError, match="--fail-under"):
        parse_fail_under([spec])


def test_parse_fail_under_rejects_a_metric_given_twice() -> None:
    with pytest.raises(EvretError, match="recall@5 is given twice"):
        parse_fail_under(["recall@5=0.1", "recall@5=0.2"])


def test_floor_passes_at_the_score_and_fails_just_above(good_results) -> None:  # type: ignore[no-untyped-def]
    score = good_results.scores["recall@5"]
    assert check_fail_under(good_results, {"recall@5": score}) == []
    [failure] = check_fail_under(good_results, {"recall@5": score + 1e-9})
    assert failure.metric == "recall@5"
    assert f"{score:.4f}" in failure.reason and "under the floor" in failure.reason
    low = good_results.intervals["recall@5"][0]
    assert f"{low:.4f}" in failure.reason  # the interval is shown
    # the worst queries are the lowest scoring ones, lowest first
    values = [v for _q, v in failure.worst]
    assert values == sorted(values) and values[0] == min(s["recall@5"] for s in good_results.per_query_scores().values())


def test_floor_on_a_metric_the_run_lacks_is_bad_input(good_results) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EvretError, match="ndcg@10, which the run did not compute"):
        check_fail_under(good_results, {"ndcg@10": 0.1})


def test_regression_gate_fails_on_a_significant_drop(good_results, bad_results) -> None:  # type: ignore[no-untyped-def]
    assert bad_results.scores["mrr@10"] < good_results.scores["mrr@10"]
    failures = check_regression(bad_results, good_results, metrics=["mrr@10", "hit_rate@1"], alpha=0.05)
    assert {f.metric for f in failures} == {"mrr@10", "hit_rate@1"}
    reason = failures[0].reason
    assert "significantly below the baseline" in reason and "Holm-adjusted" in reason
    assert all(delta < 0 for _q, delta in failures[0].worst)


def test_regression_gate_passes_when_nothing_changed(good_results) -> None:  # type: ignore[no-untyped-def]
    assert check_regression(good_results, good_results) == []


def test_an_improvement_never_fails_the_gate(good_results, bad_results) -> None:  # type: ignore[no-untyped-def]
    assert check_regression(good_results, bad_results, alpha=0.5) == []


def test_min_effect_larger_than_the_drop_passes(good_results, bad_results) -> None:  # type: ignore[no-untyped-def]
    drop = good_results.scores["mrr@10"] - bad_results.scores["mrr@10"]
    assert check_regression(bad_results, good_results, metrics=["mrr@10"], min_effect=drop + 0.01) == []
    assert len(check_regression(bad_results, good_results, metrics=["mrr@10"], min_effect=drop - 0.01)) == 1


def test_check_gates_combines_floors_and_baseline(good_results, bad_results) -> None:  # type: ignore[no-untyped-def]
    report = check_gates(bad_results, {"recall@5": 0.0}, baseline=good_results, metrics=["mrr@10"])
    assert not report.passed
    assert report.checked == ["recall@5", "mrr@10"]
    assert [line.split(":")[0] for line in report.lines()] == ["FAILED mrr@10"]
    assert check_gates(good_results, {"recall@5": 0.0}).passed


@pytest.mark.parametrize("bad", [{"min_effect": -0.1}, {"min_effect": float("nan")}, {"test": "z"}])
def test_regression_options_are_validated(good_results, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EvretError):
        check_regression(good_results, good_results, **bad)
