"""The cluster bootstrap and the cluster paired tests: equal to the per-turn ones with one turn per conversation,
NaN left out, and near the nominal coverage where the turn bootstrap is far below it."""

from __future__ import annotations

import numpy as np
import pytest

from evret_core.statistics.clustered import (
    cluster_bootstrap_intervals,
    cluster_paired_p_value,
    cluster_sums,
    number_clusters,
)
from evret_core.statistics.inference import TESTS, bootstrap_intervals, paired_p_value


def test_cluster_sums_leave_nan_out() -> None:
    values = np.array([0.5, np.nan, 1.0, 0.25, np.nan])
    sums, counts = cluster_sums(values, np.array([0, 0, 1, 1, 2]), 3)
    assert sums.tolist() == [0.5, 1.25, 0.0]
    assert counts.tolist() == [1.0, 2.0, 0.0]


def test_clusters_numbered_in_order_of_first_appearance() -> None:
    numbers, n = number_clusters(["c", "a", "c", "b", "a"])
    assert numbers.tolist() == [0, 1, 0, 2, 1] and n == 3


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_one_turn_per_conversation_equals_the_turn_bootstrap(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    columns = {"ndcg@10": rng.random(57), "recall@10": (rng.random(57) > 0.4).astype(float)}
    clusters = np.arange(57)
    used: dict[str, int] = {}
    clustered = cluster_bootstrap_intervals(columns, clusters, 0.9, 700, seed, used=used)
    assert clustered == bootstrap_intervals(columns, 0.9, 700, seed)
    assert used == {"ndcg@10": 700, "recall@10": 700}


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("test", TESTS)
def test_one_turn_per_conversation_equals_the_turn_test(seed: int, test: str) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.random(40), rng.random(40) + 0.05
    assert cluster_paired_p_value(a, b, np.arange(40), test, 2000, seed) == paired_p_value(a, b, test, 2000, seed)


def test_nan_turns_are_left_out() -> None:
    rng = np.random.default_rng(3)
    values = rng.random(30)
    clusters = np.repeat(np.arange(10), 3)
    holed = values.copy()
    holed[[1, 4, 29]] = np.nan
    kept = np.ones(30, dtype=bool)
    kept[[1, 4, 29]] = False
    assert (cluster_bootstrap_intervals({"m": holed}, clusters, seed=5)
            == cluster_bootstrap_intervals({"m": values[kept]}, clusters[kept], seed=5))
    other = rng.random(30)
    for test in TESTS:
        assert (cluster_paired_p_value(holed, other, clusters, test, 999, 2)
                == cluster_paired_p_value(values[kept], other[kept], clusters[kept], test, 999, 2))


def test_a_change_in_one_conversation_is_one_conversation_of_evidence() -> None:
    """Ten turns of one conversation all gain 0.5, the 9 other conversations' turns do not change: flipping whole
    conversations, the observed sum is matched by 2 of the 2^10 sign patterns of D (exact test)."""
    clusters = np.concatenate([np.zeros(10, dtype=np.int64), np.arange(1, 10)])
    a = np.zeros(19)
    b = np.concatenate([np.full(10, 0.5), np.zeros(9)])
    # every pattern's |sum| equals the observed one (only conversation 0 is non-zero): p = 1, one conversation
    assert cluster_paired_p_value(a, b, clusters, "randomization") == 1.0
    # as turns, the ten identical gains look like strong evidence
    assert paired_p_value(a, b, "randomization") < 0.01
    interval = cluster_bootstrap_intervals({"d": b - a}, clusters, seed=1)["d"]
    assert interval[0] <= float((b - a).mean()) <= interval[1]


def test_a_slice_of_few_measured_conversations() -> None:
    values = np.array([0.2, 0.4, np.nan, np.nan, np.nan])
    clusters = np.array([0, 0, 1, 2, 3])
    used: dict[str, int] = {}
    assert cluster_bootstrap_intervals({"m": values}, clusters, used=used) == {"m": [pytest.approx(0.3)] * 2}
    values = np.array([0.2, 0.4, 1.0, np.nan, np.nan])
    interval = cluster_bootstrap_intervals({"m": values}, clusters, n_resamples=400, used=used)["m"]
    assert 0.2 <= interval[0] <= interval[1] <= 1.0
    # a resample drawing only conversations 2 and 3 has no ratio: left out, and counted
    assert 0 < used["m"] < 400
    assert cluster_bootstrap_intervals({"m": np.full(5, np.nan)}, clusters) == {}


def test_coverage_clustered_near_nominal_turn_bootstrap_below() -> None:
    """400 simulated datasets of 60 conversations of 1-12 turns, intra-conversation correlation 0.5: the
    clustered 95% interval covers the true mean about 92% of the time, the turn bootstrap far less often."""
    rng = np.random.default_rng(36)
    hits_cluster = hits_turn = 0
    datasets = 400
    for i in range(datasets):
        sizes = rng.integers(1, 13, size=60)
        clusters = np.repeat(np.arange(60), sizes)
        effects = rng.normal(0.0, np.sqrt(0.5), size=60)
        values = 0.5 + effects[clusters] + rng.normal(0.0, np.sqrt(0.5), size=clusters.size)
        low, high = cluster_bootstrap_intervals({"m": values}, clusters, n_resamples=400, seed=i)["m"]
        hits_cluster += low <= 0.5 <= high
        low, high = bootstrap_intervals({"m": values}, n_resamples=400, seed=i)["m"]
        hits_turn += low <= 0.5 <= high
    assert 0.90 <= hits_cluster / datasets <= 0.98
    assert hits_turn / datasets < 0.75
