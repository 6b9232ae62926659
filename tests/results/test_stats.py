"""The statistics against scipy (a test dependency only) and against their definitions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from evret_core.contracts.errors import EvretError
from evret_core.statistics.inference import (
    betainc,
    bootstrap_interval,
    bootstrap_intervals,
    cohens_d_paired,
    compare_scores,
    format_interval,
    holm_bonferroni,
    paired_bootstrap_test,
    paired_randomization_test,
    paired_t_test,
    slice_scores,
    t_cdf,
)


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 29, 99, 299, 1000, 5182])
def test_t_cdf_matches_scipy(df: int) -> None:
    for t in [-40.0, -7.5, -3.0, -1.96, -0.5, -1e-6, 0.0, 0.3, 1.0, 2.5, 6.0, 25.0]:
        assert t_cdf(t, df) == pytest.approx(scipy.stats.t.cdf(t, df), rel=1e-10, abs=1e-13)


def test_betainc_matches_scipy() -> None:
    import scipy.special

    for a, b, x in itertools.product([0.5, 1.0, 2.5, 40.0, 2500.0], [0.5, 3.0, 77.0], [1e-4, 0.2, 0.5, 0.93, 0.9999]):
        assert betainc(a, b, x) == pytest.approx(scipy.special.betainc(a, b, x), rel=1e-10, abs=1e-14)


def test_paired_t_test_equals_ttest_rel() -> None:
    rng = np.random.default_rng(7)
    for n, shift in [(2, 0.3), (5, 0.1), (30, 0.05), (300, 0.02), (300, 0.0), (2000, 0.01)]:
        a = rng.uniform(size=n)
        b = np.clip(a + rng.normal(shift, 0.2, size=n), 0, 1)
        expected = scipy.stats.ttest_rel(b, a).pvalue
        assert paired_t_test(a, b) == pytest.approx(expected, rel=1e-10, abs=1e-14)


def test_paired_t_test_on_real_runs_equals_ttest_rel(id_runs) -> None:  # type: ignore[no-untyped-def]
    a, b = id_runs["titles"], id_runs["full"]
    for metric in a.metrics:
        x = [a.per_query[q].scores[metric] for q in a.per_query]
        y = [b.per_query[q].scores[metric] for q in a.per_query]
        assert paired_t_test(x, y) == pytest.approx(scipy.stats.ttest_rel(y, x).pvalue, rel=1e-10)


def test_identical_runs_have_p_one_and_effect_zero() -> None:
    a = [0.1, 0.5, 0.9, 0.3]
    assert paired_t_test(a, a) == 1.0
    assert paired_randomization_test(a, a) == 1.0
    assert paired_bootstrap_test(a, a) == 1.0
    assert cohens_d_paired(a, a) == 0.0


def test_randomization_test_is_exact_for_small_n() -> None:
    a = np.array([0.2, 0.4, 0.1, 0.5, 0.3, 0.6])
    b = np.array([0.5, 0.45, 0.4, 0.9, 0.2, 0.8])
    d = b - a
    flips = [abs(np.mean(np.array(s) * d)) for s in itertools.product([-1, 1], repeat=d.size)]
    exact = np.mean([f >= abs(d.mean()) - 1e-12 for f in flips])
    assert paired_randomization_test(a, b, n_resamples=1000) == pytest.approx(exact)


def test_resampling_tests_agree_with_scipy_permutation_and_t() -> None:
    rng = np.random.default_rng(3)
    a = rng.uniform(size=200)
    b = np.clip(a + rng.normal(0.03, 0.25, size=200), 0, 1)
    reference = scipy.stats.permutation_test(
        (b - a,), np.mean, permutation_type="samples", n_resamples=20000, random_state=1
    ).pvalue
    ours = paired_randomization_test(a, b, n_resamples=20000, seed=1)
    assert abs(ours - reference) < 0.02
    # the bootstrap test approximates the t-test's p-value on a sample this large
    assert abs(paired_bootstrap_test(a, b, n_resamples=20000) - paired_t_test(a, b)) < 0.03


def test_seeded_resampling_is_repeatable() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.uniform(size=50), rng.uniform(size=50)
    assert paired_randomization_test(a, b, seed=5) == paired_randomization_test(a, b, seed=5)
    assert bootstrap_interval(a, seed=5) == bootstrap_interval(a, seed=5)
    assert bootstrap_interval(a, seed=5) != bootstrap_interval(a, seed=6)


def test_holm_bonferroni_matches_definition() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    # sorted: 0.005*5=0.025, 0.01*4=0.04, 0.03*3=0.09, 0.04*2=0.08->0.09 (monotone), 0.5*1=0.5
    assert holm_bonferroni(p) == pytest.approx([0.04, 0.09, 0.09, 0.025, 0.5])
    assert holm_bonferroni([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm_bonferroni([]) == []


def test_cohens_d_paired() -> None:
    a = np.array([0.1, 0.2, 0.3, 0.4])
    b = np.array([0.3, 0.3, 0.6, 0.5])
    d = b - a
    assert cohens_d_paired(a, b) == pytest.approx(d.mean() / d.std(ddof=1))


def test_bootstrap_interval_is_percentile_bootstrap() -> None:
    rng = np.random.default_rng(11)
    values = rng.beta(2, 3, size=400)
    low, high = bootstrap_interval(values, confidence_level=0.95, n_resamples=1000, seed=0)
    # the same resamples drawn by hand
    index = np.random.default_rng(0).integers(0, values.size, size=(1000, values.size))
    means = values[index].mean(axis=1)
    assert (low, high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    ref = scipy.stats.bootstrap((values,), np.mean, n_resamples=4000, method="percentile", random_state=0)
    assert low == pytest.approx(ref.confidence_interval.low, abs=0.006)
    assert high == pytest.approx(ref.confidence_interval.high, abs=0.006)
    assert low < values.mean() < high
    narrow = bootstrap_interval(values, confidence_level=0.5)
    assert low < narrow[0] < narrow[1] < high


def test_bootstrap_intervals_share_resamples_and_chunk() -> None:
    values = np.linspace(0, 1, 101)
    both = bootstrap_intervals({"a": values, "b": values}, n_resamples=500, seed=2)
    assert both["a"] == both["b"]
    import evret_core.statistics.inference as stats

    saved = stats._CHUNK_CELLS
    try:
        stats._CHUNK_CELLS = 1000  # forces many chunks; the draws are the same stream
        chunked = bootstrap_intervals({"a": values}, n_resamples=500, seed=2)["a"]
    finally:
        stats._CHUNK_CELLS = saved
    assert chunked == pytest.approx(both["a"])


def test_resampled_means_drawn_in_a_second_thread_are_the_one_stream() -> None:
    """Many chunks go through the drawing thread; the means must be those of one generator's draws, in order."""
    import evret_core.statistics.inference as stats

    matrix = np.random.default_rng(5).random((37, 2))
    saved = stats._CHUNK_CELLS
    try:
        stats._CHUNK_CELLS = 37 * 2 * 3  # 3 resamples a chunk: 34 chunks for 100 resamples
        means = stats._resampled_means(matrix, 100, np.random.default_rng(9))
    finally:
        stats._CHUNK_CELLS = saved
    index = np.random.default_rng(9).integers(0, 37, size=(100, 37))
    np.testing.assert_allclose(means, matrix[index].mean(axis=1), rtol=1e-13)
    once = stats._resampled_means(matrix, 100, np.random.default_rng(9))  # one chunk, no thread
    np.testing.assert_allclose(means, once, rtol=1e-13)


def test_bad_options_are_evret_errors() -> None:
    with pytest.raises(EvretError, match="confidence_level"):
        bootstrap_interval([1, 2], confidence_level=95)
    with pytest.raises(EvretError, match="n_resamples"):
        bootstrap_interval([1, 2], n_resamples=0)
    with pytest.raises(EvretError, match="same length"):
        paired_t_test([1, 2, 3], [1, 2])


def test_format_interval() -> None:
    assert format_interval(0.6123, [0.5512, 0.6641]) == "0.612 [0.551, 0.664]"
    assert format_interval(0.5, None) == "0.500"


def test_compare_scores_mismatched_queries() -> None:
    runs = {"a": {"q1": {"m": 0.1}, "q2": {"m": 0.2}, "q3": {"m": 0.4}},
            "b": {"q1": {"m": 0.3}, "q2": {"m": 0.2}, "q4": {"m": 0.9}}}
    with pytest.raises(EvretError, match=r"do not score the same queries.*q3.*q4.*--intersection"):
        compare_scores(runs, ["m"])
    c = compare_scores(runs, ["m"], intersection=True)
    assert c.query_ids == ["q1", "q2"]
    assert "2 queries common" in c.warnings[0]
    assert c.pairs[0].delta == pytest.approx(0.1)


def test_compare_scores_three_runs_holm_and_gains() -> None:
    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(80)]
    base = rng.uniform(size=80)
    runs = {
        "base": {q: {"m": float(v), "n": float(v)} for q, v in zip(ids, base, strict=True)},
        "same": {q: {"m": float(v + rng.normal(0, 0.01)), "n": float(v)} for q, v in zip(ids, base, strict=True)},
        "better": {q: {"m": float(min(1, v + 0.2)), "n": float(v)} for q, v in zip(ids, base, strict=True)},
    }
    c = compare_scores(runs, ["m", "n"], test="t")
    assert len(c.pairs) == 6  # 2 metrics x 3 pairs, all corrected together
    raw = [p.p_value for p in c.pairs]
    assert [p.p_adjusted for p in c.pairs] == pytest.approx(holm_bonferroni(raw))
    by = {(p.metric, p.a, p.b): p for p in c.pairs}
    assert by[("m", "base", "better")].significant and by[("m", "base", "better")].delta > 0.1
    assert not by[("m", "base", "same")].significant
    assert by[("n", "base", "same")].p_value == 1.0
    gained = by[("m", "base", "better")].gained
    assert gained and all(g["delta"] > 0 for g in gained)
    assert gained[0]["delta"] == max(min(1, v + 0.2) - v for v in base)
    assert by[("m", "same", "better")].lost == [] or all(x["delta"] < 0 for x in by[("m", "same", "better")].lost)


def test_slices_flag_small_ones() -> None:
    scores = {"m": [1.0, 0.0, 1.0, 1.0, 0.5]}
    tags = [{"kind": "a"}, {"kind": "a"}, {"kind": "b"}, {}, {"kind": "a", "lang": "en"}]
    out = slice_scores(scores, tags, min_slice_size=3)
    assert out["kind"]["a"]["n"] == 3 and out["kind"]["a"]["small"] is False
    assert out["kind"]["a"]["scores"]["m"] == pytest.approx(0.5)
    assert out["kind"]["b"] == {"n": 1, "scores": {"m": 1.0}, "intervals": {"m": [1.0, 1.0]}, "small": True}
    assert out["lang"]["en"]["small"] is True
    assert math.isclose(sum(s["n"] for s in out["kind"].values()), 4)


class _KernelSpy:
    """The compiled ``resample_sums``, counting its calls."""

    def __init__(self, real: object) -> None:
        self.real, self.calls = real, 0

    def __call__(self, *args: object) -> None:
        self.calls += 1
        self.real(*args)  # type: ignore[operator]


def test_compiled_resample_sums_agree_with_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same draws, sums added in another order: the means agree to 1e-12 and so do the intervals."""
    import os

    import evret_core.statistics.inference as stats

    real = stats._resample_kernel()
    if real is None:
        if os.environ.get("CI"):
            pytest.fail("the compiled accelerator is not built (CI must test it)")
        pytest.skip("the compiled accelerator evret_core.metrics._fastrank is not built (no C compiler at install)")
    columns = {f"m{k}": np.random.default_rng(k).random(3001) ** (k + 1) for k in range(6)}  # 6 metrics: 4 + 2
    monkeypatch.setattr(stats, "_CHUNK_CELLS", 3001 * 6 * 40)  # 40 resamples a chunk: the drawing thread runs
    spy = _KernelSpy(real)
    monkeypatch.setattr(stats, "_resample_kernel", lambda: spy)
    matrix = np.column_stack(list(columns.values()))
    compiled = stats._resampled_means(matrix, 300, np.random.default_rng(4))
    compiled_intervals = stats.bootstrap_intervals(columns, n_resamples=300, seed=4)
    assert spy.calls == 2 * 8
    monkeypatch.setattr(stats, "_resample_kernel", lambda: None)
    plain = stats._resampled_means(matrix, 300, np.random.default_rng(4))
    np.testing.assert_allclose(compiled, plain, rtol=1e-12)
    plain_intervals = stats.bootstrap_intervals(columns, n_resamples=300, seed=4)
    for name in columns:
        assert compiled_intervals[name] == pytest.approx(plain_intervals[name], rel=1e-12)


def test_add_statistics_beside_the_hash_gives_the_same_intervals() -> None:
    """With a dataset, the bootstrap runs in a thread beside the dataset's hash: same numbers as alone."""
    from evret_core import EvaluationDataset, Evaluator, QueryExample

    rng = np.random.default_rng(8)
    qrels = {f"q{i}": {f"d{i}_{j}": 1.0 for j in range(int(rng.integers(1, 4)))} for i in range(400)}
    run = {q: {f"d{q[1:]}_{j}": float(rng.random()) for j in range(6)} for q in qrels}
    dataset = EvaluationDataset(queries=[QueryExample(query_id=q, query_text=q, relevant_doc_ids=r)
                                         for q, r in qrels.items()])
    results = Evaluator(run, ["ndcg@5", "recall@5"], n_resamples=200, seed=3).evaluate(dataset)
    _, columns, _ = results.score_columns()
    assert results.intervals == bootstrap_intervals(columns, n_resamples=200, seed=3)
    assert results.manifest is not None and results.manifest.dataset["hash"] == dataset.content_hash()
