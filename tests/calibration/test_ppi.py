"""The prediction-powered mean on synthetic data with a known truth."""

from __future__ import annotations

import numpy as np
import pytest

from evret_core.calibration.ppi import add_prediction_powered, ppi_mean
from evret_core.contracts.errors import EvretError
from evret_core.results.evaluation import EvaluationResults, QueryResult


def test_rectifier_removes_a_constant_bias_exactly() -> None:
    rng = np.random.default_rng(1)
    y = rng.random(500)
    f = y + 0.2  # the judge over-credits every query by 0.2
    labelled = rng.choice(500, size=40, replace=False)
    est = ppi_mean(f, y[labelled], f[labelled])
    assert est.judged == pytest.approx(y.mean() + 0.2)
    assert est.rectifier == pytest.approx(-0.2)
    assert est.estimate == pytest.approx(y.mean())
    # y - f is constant: the judge's error adds no width, only query sampling does
    width = est.interval[1] - est.interval[0]
    assert width == pytest.approx(2 * 1.959964 * np.sqrt(f.var(ddof=1) / 500), rel=1e-4)


def test_perfect_judge_gives_the_plain_normal_interval() -> None:
    y = np.linspace(0, 1, 101)
    est = ppi_mean(y, y[:10], y[:10])
    assert est.estimate == pytest.approx(0.5)
    assert est.interval[0] < 0.5 < est.interval[1]
    assert est.rectifier == 0.0


def test_coverage_of_the_superpopulation_mean_is_nominal() -> None:
    # truth: Bernoulli(0.3) hits; a judge with 20% false positives and 10% misses (biased upward)
    rng = np.random.default_rng(7)
    covered_ppi = covered_naive = 0
    reps = 2000
    for _ in range(reps):
        y = (rng.random(300) < 0.3).astype(float)
        flip_up = (y == 0) & (rng.random(300) < 0.2)
        flip_down = (y == 1) & (rng.random(300) < 0.1)
        f = np.where(flip_up, 1.0, np.where(flip_down, 0.0, y))
        idx = rng.choice(300, size=60, replace=False)
        est = ppi_mean(f, y[idx], f[idx])
        covered_ppi += est.interval[0] <= 0.3 <= est.interval[1]
        half = 1.96 * f.std(ddof=1) / np.sqrt(300)
        covered_naive += f.mean() - half <= 0.3 <= f.mean() + half
    assert 0.93 <= covered_ppi / reps <= 0.97
    assert covered_naive / reps < 0.2  # the judge-only interval misses the bias


def test_bad_input_is_an_evret_error() -> None:
    with pytest.raises(EvretError, match="NaN"):
        ppi_mean([0.1, float("nan")], [0.1, 0.2], [0.1, 0.2])
    with pytest.raises(EvretError, match="at least 2 labelled"):
        ppi_mean([0.1, 0.2], [0.1], [0.1])
    with pytest.raises(EvretError, match="2 true values but 3"):
        ppi_mean([0.1, 0.2], [0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(EvretError, match="between 0 and 1"):
        ppi_mean([0.1, 0.2], [0.1, 0.2], [0.1, 0.2], confidence_level=95)


def _results(values: dict[str, float]) -> EvaluationResults:
    per_query = {q: QueryResult(query_id=q, query_text=q, scores={"hit_rate@1": v}, retrieved_ids=[])
                 for q, v in values.items()}
    return EvaluationResults(scores={"hit_rate@1": float(np.mean(list(values.values())))},
                             metrics=["hit_rate@1"], per_query=per_query, confidence_level=0.9)


def test_results_get_a_field_beside_the_plain_estimate() -> None:
    judged = _results({f"q{i}": float(i % 2) for i in range(10)})
    truth = {"q0": {"hit_rate@1": 1.0}, "q1": {"hit_rate@1": 1.0}, "q2": {"hit_rate@1": 0.0}}
    add_prediction_powered(judged, truth)
    entry = judged.prediction_powered["hit_rate@1"]
    assert entry["judged"] == 0.5
    assert entry["rectifier"] == pytest.approx(1 / 3)
    assert entry["estimate"] == pytest.approx(0.5 + 1 / 3)
    assert entry["n"] == 10 and entry["n_labelled"] == 3 and entry["confidence_level"] == 0.9
    again = EvaluationResults.from_json(judged.to_json())
    assert again.prediction_powered == judged.prediction_powered
    with pytest.raises(EvretError, match="'zz' is not in the results"):
        add_prediction_powered(judged, {"zz": {"hit_rate@1": 1.0}, "q0": {"hit_rate@1": 1.0}})


# -- issue 24 (newcomer problem 15): a bounded metric's estimate and interval stay inside its range ---------------
def test_a_bounded_metrics_interval_is_clipped_and_the_normal_values_kept() -> None:
    # nearly every query a hit, the judge right on all but one labelled query: the normal interval crosses 1
    judged = _results({f"q{i}": 1.0 if i % 11 else 0.0 for i in range(22)})
    truth = {"q0": {"hit_rate@1": 1.0}, "q1": {"hit_rate@1": 1.0}, "q2": {"hit_rate@1": 1.0},
             "q3": {"hit_rate@1": 1.0}}
    add_prediction_powered(judged, truth)
    entry = judged.prediction_powered["hit_rate@1"]
    assert entry["unclipped_interval"][1] > 1.0  # what the normal interval alone says
    assert entry["interval"] == [entry["unclipped_interval"][0], 1.0]
    assert entry["estimate"] == min(entry["unclipped_estimate"], 1.0) and entry["value_range"] == [0.0, 1.0]
    assert entry["estimate"] == pytest.approx(min(entry["judged"] + entry["rectifier"], 1.0))


def test_clipping_is_to_the_given_range_and_absent_without_one() -> None:
    y = np.linspace(0, 1, 101)
    low = ppi_mean(y * 0.02, y[:10] * 0.0, y[:10] * 0.02 + 0.01, value_range=(0.0, 1.0))
    assert low.unclipped_estimate is not None and low.unclipped_estimate < 0.0
    assert low.estimate == 0.0 and low.interval[0] == 0.0 and low.interval[1] >= 0.0
    plain = ppi_mean(y * 0.02, y[:10] * 0.0, y[:10] * 0.02 + 0.01)
    assert plain.estimate < 0.0 and plain.value_range is None and plain.unclipped_interval is None
    with pytest.raises(EvretError, match="value_range must be finite"):
        ppi_mean(y, y[:10], y[:10], value_range=(1.0, 0.0))
