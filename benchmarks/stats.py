"""Speed of Evret's statistics against scipy and ranx on the same per-query scores.

Run: .venv/bin/python benchmarks/stats.py [--quick]
Prints one table (median wall time of several repeats, and the peer's time divided by Evret's).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import scipy.stats

from evret_core.statistics.inference import bootstrap_interval, paired_randomization_test, paired_t_test


def timed(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: numba compilation, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7

    rows = [row for n in (300, 5000) for row in measure(n, repeats)]
    print("| task | peer | Evret (ms) | peer (ms) | peer / Evret |")
    print("|---|---|---|---|---|")
    for task, peer, ours, theirs in rows:
        print(f"| {task} | {peer} | {ours * 1000:.2f} | {theirs * 1000:.2f} | {theirs / ours:.2f}x |")


def measure(n: int, repeats: int) -> list[tuple[str, str, float, float]]:
    """Evret's and a peer's time for each task on ``n`` queries."""
    from ranx.statistical_tests.fisher_randomization_test import fisher_randomization_test

    rows = []
    rng = np.random.default_rng(0)
    a = rng.uniform(size=n)
    b = np.clip(a + rng.normal(0.01, 0.2, size=n), 0, 1)
    d = b - a
    rows.append((f"randomization test, 10k, n={n}", "ranx fisher_randomization_test",
                 timed(lambda: paired_randomization_test(a, b, 10000), repeats),
                 timed(lambda: fisher_randomization_test(a, b, 10000), repeats)))
    rows.append((f"randomization test, 10k, n={n}", "scipy permutation_test",
                 timed(lambda: paired_randomization_test(a, b, 10000), repeats),
                 timed(lambda: scipy.stats.permutation_test(
                     (d,), lambda x, axis: np.mean(x, axis=axis), vectorized=True,
                     permutation_type="samples", n_resamples=10000, random_state=0), repeats)))
    rows.append((f"bootstrap 95% CI, 1k, n={n}", "scipy bootstrap (percentile)",
                 timed(lambda: bootstrap_interval(a), repeats),
                 timed(lambda: scipy.stats.bootstrap((a,), np.mean, n_resamples=1000, method="percentile",
                                                     random_state=0), repeats)))
    rows.append((f"paired t-test, n={n}", "scipy ttest_rel",
                 timed(lambda: paired_t_test(a, b), repeats * 10),
                 timed(lambda: scipy.stats.ttest_rel(b, a), repeats * 10)))
    return rows


if __name__ == "__main__":
    main()
