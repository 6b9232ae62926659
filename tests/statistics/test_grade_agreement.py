"""The label-agreement formulas against scikit-learn and the krippendorff package on random grades, and the
conventions for degenerate tables."""

from __future__ import annotations

import os

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from evret_core.statistics import grade_agreement as ga

SEEDS = range(20)


def _krippendorff():  # type: ignore[no-untyped-def]
    """The krippendorff package: in the dev extra, so CI must have it; skipped elsewhere when absent."""
    if os.environ.get("CI"):
        import krippendorff

        return krippendorff
    return pytest.importorskip("krippendorff")


def _grades(seed: int, n: int = 500, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ref = rng.integers(0, k, size=n)
    noise = rng.integers(-1, 2, size=n) * (rng.random(n) < 0.5)
    return ref, np.clip(ref + noise, 0, k - 1)


def _confusion(ref: np.ndarray, jud: np.ndarray) -> np.ndarray:
    labels = np.unique(np.concatenate([ref, jud]))
    index = {g: i for i, g in enumerate(labels)}
    out = np.zeros((len(labels), len(labels)))
    for a, b in zip(ref, jud, strict=True):
        out[index[a], index[b]] += 1
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_kappas_equal_scikit_learn(seed: int) -> None:
    ref, jud = _grades(seed)
    o = _confusion(ref, jud)
    assert float(ga.exact_agreement(o)) == pytest.approx(np.mean(ref == jud), abs=1e-12)
    assert float(ga.cohen_kappa(o)) == pytest.approx(cohen_kappa_score(ref, jud), abs=1e-12)
    for weights in ("linear", "quadratic"):
        assert float(ga.weighted_kappa(o, weights)) == pytest.approx(
            cohen_kappa_score(ref, jud, weights=weights), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_ordinal_alpha_equals_the_krippendorff_package(seed: int) -> None:
    krippendorff = _krippendorff()
    ref, jud = _grades(seed, n=300)
    expected = krippendorff.alpha(reliability_data=np.vstack([ref, jud]).astype(float),
                                  level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])
    assert float(ga.krippendorff_alpha(_confusion(ref, jud))) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_binary_cut_kappas_equal_scikit_learn_on_thresholded_grades(seed: int) -> None:
    ref, jud = _grades(seed)
    cuts = ga.binary_confusions(_confusion(ref, jud))
    assert cuts.shape == (3, 2, 2)
    for c in range(1, 4):
        assert cuts[c - 1].sum() == len(ref)
        assert cuts[c - 1, 1, 1] == np.sum((ref >= c) & (jud >= c))
        assert cuts[c - 1, 0, 1] == np.sum((ref < c) & (jud >= c))
        assert float(ga.cohen_kappa(cuts[c - 1])) == pytest.approx(cohen_kappa_score(ref >= c, jud >= c), abs=1e-12)


def test_vectorised_over_leading_axes_equals_one_table_at_a_time() -> None:
    tables = np.stack([_confusion(*_grades(s)) for s in range(6)])
    for fn in (ga.exact_agreement, ga.cohen_kappa, ga.krippendorff_alpha):
        np.testing.assert_allclose(fn(tables), [float(fn(t)) for t in tables], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ga.weighted_kappa(tables, "linear"),
                               [float(ga.weighted_kappa(t, "linear")) for t in tables], rtol=0, atol=1e-12)


def test_constant_raters_give_kappa_zero_and_alpha_undefined() -> None:
    same = np.array([[0.0, 0.0], [0.0, 7.0]])  # both said grade 1 to all 7 pairs
    assert float(ga.cohen_kappa(same)) == 0.0
    assert float(ga.weighted_kappa(same, "linear")) == 0.0
    assert float(ga.weighted_kappa(same, "quadratic")) == 0.0
    assert np.isnan(ga.krippendorff_alpha(same))
    apart = np.array([[0.0, 5.0], [0.0, 0.0]])  # reference always 0, judged always 1: no agreement, no chance
    assert float(ga.cohen_kappa(apart)) == 0.0
    assert float(ga.exact_agreement(apart)) == 0.0


def test_perfect_agreement_is_one() -> None:
    o = np.diag([3.0, 4.0, 5.0])
    for value in (ga.cohen_kappa(o), ga.weighted_kappa(o, "quadratic"), ga.krippendorff_alpha(o)):
        assert float(value) == pytest.approx(1.0, abs=1e-12)
