"""Rank correlations of two scorings of the same systems against scipy, and tau_AP against a brute-force
implementation of Yilmaz, Aslam and Robertson's (2008) definition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from evret_core.statistics import rank_correlation as rc


def _scores(seed: int, s: int = 9, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ref = rng.random(s)
    jud = ref + rng.normal(0, 0.3, s)
    if ties:  # a few equal values on each side
        ref, jud = np.round(ref * 4) / 4, np.round(jud * 4) / 4
    return ref, jud


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_tau_b_and_rho_equal_scipy(seed: int, ties: bool) -> None:
    ref, jud = _scores(seed, ties=ties)
    assert float(rc.kendall_tau_b(ref, jud)) == pytest.approx(kendalltau(ref, jud).statistic, abs=1e-12)
    assert float(rc.spearman_rho(ref, jud)) == pytest.approx(spearmanr(ref, jud).statistic, abs=1e-12)


def _tau_ap_by_definition(ref: list[float], jud: list[float]) -> float:
    """Yilmaz et al.: the judged list best first; C(i) = items above rank i that the true (reference) list also
    ranks above the item at rank i."""
    order = sorted(range(len(jud)), key=lambda i: -jud[i])
    total = 0.0
    for i in range(1, len(order)):
        correct = sum(1 for j in order[:i] if ref[j] > ref[order[i]])
        total += correct / i
    return 2.0 / (len(order) - 1) * total - 1.0


@pytest.mark.parametrize("seed", range(20))
def test_tau_ap_equals_the_definition_without_ties(seed: int) -> None:
    ref, jud = _scores(seed, s=3 + seed % 8)
    assert float(rc.tau_ap(ref, jud)) == pytest.approx(_tau_ap_by_definition(list(ref), list(jud)), abs=1e-12)


def test_tau_ap_known_cases() -> None:
    up = np.arange(6.0)
    assert float(rc.tau_ap(up, up)) == 1.0
    assert float(rc.tau_ap(up, -up)) == -1.0
    # a swap at the top costs more than a swap at the bottom (the point of tau_AP); tau-b sees them alike
    top = np.array([0, 1, 2, 3, 5, 4.0])  # the two best swapped
    bottom = np.array([1.0, 0, 2, 3, 4, 5])  # the two worst swapped
    assert float(rc.kendall_tau_b(up, top)) == float(rc.kendall_tau_b(up, bottom))
    assert float(rc.tau_ap(up, top)) < float(rc.tau_ap(up, bottom))
    # three systems, the judge swaps the two best: C(2) = 0, C(3) = 2 -> 2/2 (0/1 + 2/2) - 1 = 0
    assert float(rc.tau_ap(np.array([3.0, 2.0, 1.0]), np.array([2.0, 3.0, 1.0]))) == 0.0
    # all permutations of 4: the definition, and the mean over every judged order is 0
    values = [float(rc.tau_ap(np.arange(4.0), np.array(p, dtype=float))) for p in itertools.permutations(range(4))]
    assert values == pytest.approx([_tau_ap_by_definition([0, 1, 2, 3], list(p))
                                    for p in itertools.permutations(range(4))], abs=1e-12)
    assert np.mean(values) == pytest.approx(0.0, abs=1e-12)


def test_tau_ap_ties_identical_rankings_give_one_and_judge_ties_count_against() -> None:
    tied = np.array([1.0, 1.0, 0.0])
    assert float(rc.tau_ap(tied, tied)) == 1.0
    # the judge ties the two the reference separates: placed worst-first, one wrong pair
    assert float(rc.tau_ap(np.array([2.0, 1.0, 0.0]), np.array([1.0, 1.0, 0.0]))) == pytest.approx(0.0)


def test_swap_rate_and_ties() -> None:
    ref = np.array([0.1, 0.2, 0.3, 0.4])
    jud = np.array([0.2, 0.1, 0.3, 0.3])  # pair (0,1) swapped; pair (2,3) tied in judged
    assert float(rc.swap_rate(ref, jud)) == pytest.approx(1 / 6)
    assert int(rc.tied_pairs(ref, jud)) == 1
    assert float(rc.swap_rate(ref, ref)) == 0.0
    assert float(rc.swap_rate(ref, -ref)) == 1.0


def test_undefined_when_a_side_ties_every_system() -> None:
    ref, flat = np.array([0.1, 0.2, 0.3]), np.full(3, 0.5)
    assert np.isnan(rc.kendall_tau_b(ref, flat))
    assert np.isnan(rc.spearman_rho(flat, ref))


def test_tie_tolerance_absorbs_summation_order() -> None:
    ref = np.array([0.3, 0.1 + 0.2, 0.5])  # 0.30000000000000004: the same mean summed another way
    assert int(rc.tied_pairs(ref, ref)) == 1
    assert float(rc.kendall_tau_b(ref, ref)) == pytest.approx(1.0)


def test_vectorised_over_resamples_equals_one_at_a_time() -> None:
    pairs = [_scores(s, ties=s % 2 == 0) for s in range(12)]
    ref, jud = np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
    for fn in (rc.kendall_tau_b, rc.spearman_rho, rc.tau_ap, rc.swap_rate, rc.tied_pairs):
        np.testing.assert_allclose(fn(ref, jud), [float(fn(a, b)) for a, b in pairs], rtol=0, atol=1e-12)
