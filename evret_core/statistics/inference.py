"""Statistics over per-query scores, numpy only: bootstrap intervals, paired tests, Holm correction, slices.

Every function is deterministic for a given ``seed``. The paired t-test's p-values equal
``scipy.stats.ttest_rel``'s; the Student t distribution is computed here through the regularized incomplete beta
function (continued fraction), so the core needs no scipy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.limits import MAX_RESAMPLES

TESTS = ("t", "randomization", "bootstrap")
DEFAULT_LEVEL = 0.95
DEFAULT_RESAMPLES = 1000
DEFAULT_TEST_RESAMPLES = 10000
# Resampled indexes drawn at once: bounds memory at about 2 x _CHUNK_CELLS x 8 bytes (a chunk counted, the next one
# drawn) whatever the query count.
_CHUNK_CELLS = 4_000_000
_INTEGER = re.compile(r"[+-]?[0-9]+")


# -- the t distribution ------------------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz), converging for x < (a+1)/(a+b+2)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = tiny if abs(d) < tiny else d
    d = 1.0 / d
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = tiny if abs(d) < tiny else d
        c = 1.0 + aa / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < 1e-16:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float, y: float | None = None) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1.

    ``y`` is ``1 - x`` when the caller knows it more precisely than the subtraction would give it.
    """
    if not (a > 0 and b > 0):
        raise ValueError(f"betainc needs a, b > 0, got a={a}, b={b}")
    if y is None:
        y = 1.0 - x
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    # the fraction converges fast on one side of the mean; use the symmetry I_x(a,b) = 1 - I_{1-x}(b,a) on the other
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, y) / b


def t_sf_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    t2 = t * t
    # x and 1 - x computed separately: near t = 0, 1 - x would lose every digit to cancellation
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2)))


def t_cdf(t: float, df: float) -> float:
    """The cumulative distribution function of Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * t_sf_two_sided(t, df)
    return 1.0 - tail if t > 0 else tail


# -- intervals ---------------------------------------------------------------------------------------------------
def check_confidence_level(level: float) -> float:
    """``level`` as a float, or an EvretError naming the option when it is not strictly between 0 and 1."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise EvretError(f"confidence_level must be between 0 and 1 (e.g. 0.95), got {level}")
    return level


def check_resamples(n_resamples: int, option: str = "n_resamples") -> int:
    """``n_resamples`` as an int, or an EvretError naming the option when it is not positive."""
    if not 1 <= int(n_resamples) <= MAX_RESAMPLES:
        raise EvretError(f"{option} must be an integer from 1 to {MAX_RESAMPLES}, got {n_resamples}")
    return int(n_resamples)


def _resample_kernel() -> Any:
    """The compiled ``resample_sums`` (see :func:`_resampled_means`), or None for the numpy path."""
    from evret_core.metrics.engine import accelerator

    return getattr(accelerator(), "resample_sums", None)


def _resampled_means(matrix: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_resamples`` bootstrap resamples of the rows of ``matrix`` (n x m) -> (n_resamples x m).

    Each resample is n row indexes drawn with replacement; its means are, per metric, the sum over rows of (times
    drawn) x value, over n: one pass for every metric at once, instead of gathering n x m values per resample.
    Where the compiled accelerator was built, ``resample_sums`` counts and sums each resample in C without the
    GIL (the counts stay in cache); otherwise each resample's counts are a bincount and a matrix product sums a
    chunk of them. The two paths add in different orders: their means agree to about 1e-14, relative. Chunks of at
    most ``_CHUNK_CELLS`` drawn indexes keep memory bounded whatever the number of queries.

    With more than one chunk, a second thread draws the next chunk's indexes while this one sums the current
    chunk: numpy draws without holding the GIL, so on two cores the draws overlap the sums. The chunks are drawn
    one after the other from the one generator, so the draws are the same as drawing them all in this thread.
    """
    n, m = matrix.shape
    out = np.empty((n_resamples, m), dtype=np.float64)
    rows = max(1, _CHUNK_CELLS // max(n * m, 1))
    starts = range(0, n_resamples, rows)
    kernel = _resample_kernel()
    source = np.ascontiguousarray(matrix, dtype=np.float64)
    counts = None if kernel is not None else np.empty((min(rows, n_resamples), n), dtype=np.float64)

    def draw(start: int) -> np.ndarray:
        # one index draw serves every metric, so intervals of different metrics come from the same resamples
        return rng.integers(0, n, size=(min(n_resamples, start + rows) - start, n), dtype=np.int64)

    def add_up(start: int, index: np.ndarray) -> None:
        size = index.shape[0]
        if kernel is not None:
            kernel(index, source, out[start : start + size])
            return
        assert counts is not None
        for j in range(size):  # a bincount per resample, written as floats: no offset or cast pass
            counts[j] = np.bincount(index[j], minlength=n)
        out[start : start + size] = counts[:size] @ source

    if len(starts) == 1:
        add_up(0, draw(0))
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="evret-bootstrap") as pool:
            pending = pool.submit(draw, starts[0])
            for i, start in enumerate(starts):
                index = pending.result()  # the previous draw ended before the next starts: one stream, in order
                if i + 1 < len(starts):
                    pending = pool.submit(draw, starts[i + 1])
                add_up(start, index)
    out /= n
    return out


def bootstrap_intervals(
    scores: Mapping[str, Sequence[float] | np.ndarray],
    confidence_level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Percentile bootstrap interval of each metric's mean over queries: metric -> [low, high].

    Queries are resampled with replacement (the same resamples for every metric); ``seed`` makes it repeatable.
    With fewer than two queries the interval is the mean itself.
    """
    level = check_confidence_level(confidence_level)
    n_resamples = check_resamples(n_resamples)
    names = list(scores)
    if not names:
        return {}
    matrix = np.column_stack([np.asarray(scores[m], dtype=np.float64) for m in names])
    if matrix.shape[0] < 2:
        mean = matrix.mean(axis=0) if matrix.shape[0] else np.zeros(len(names))
        return {m: [float(mean[i]), float(mean[i])] for i, m in enumerate(names)}
    means = _resampled_means(matrix, n_resamples, np.random.default_rng(seed))
    alpha = 1.0 - level
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    return {m: [float(low[i]), float(high[i])] for i, m in enumerate(names)}


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    confidence_level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values``."""
    low, high = bootstrap_intervals({"x": values}, confidence_level, n_resamples, seed)["x"]
    return low, high


def format_interval(value: float, interval: Sequence[float] | None, digits: int = 3) -> str:
    """``0.612 [0.551, 0.664]``; just the value when there is no interval."""
    if not interval:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


# -- paired tests ------------------------------------------------------------------------------------------------
def _paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise EvretError(f"paired test needs two score lists of the same length, got {x.shape} and {y.shape}")
    if x.size < 2:
        raise EvretError(f"paired test needs at least 2 queries, got {x.size}")
    return y - x


def paired_t_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of the paired t-test of ``b - a`` (as ``scipy.stats.ttest_rel(b, a)``).

    When every difference is zero the p-value is 1.0 (scipy gives nan): identical runs do not differ.
    """
    d = _paired(a, b)
    n = d.size
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (sd / math.sqrt(n))
    return t_sf_two_sided(t, n - 1)


def paired_randomization_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> float:
    """Two-sided p-value of the paired randomization (sign-flip permutation) test on the mean difference.

    Exact (every sign pattern) when 2^n <= ``n_resamples``; otherwise Monte Carlo with the +1 correction,
    ``(hits + 1) / (n_resamples + 1)``, so the p-value is never 0.
    """
    d = _paired(a, b)
    n_resamples = check_resamples(n_resamples)
    n = d.size
    observed = abs(d.mean())
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= 20 and 2**n <= n_resamples:
        patterns = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        stats = np.abs(patterns @ d) / n
        return float(np.mean(stats >= observed - tolerance))
    rng = np.random.default_rng(seed)
    hits = 0
    rows = max(1, _CHUNK_CELLS // n)
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ d) / n >= observed - tolerance))
    return (hits + 1) / (n_resamples + 1)


def paired_bootstrap_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> float:
    """Two-sided p-value of the paired bootstrap test: how often resampled, null-centred differences are as large.

    The differences are shifted to mean 0 (the null hypothesis), resampled over queries, and compared with the
    observed mean difference; ``(hits + 1) / (n_resamples + 1)``.
    """
    d = _paired(a, b)
    n_resamples = check_resamples(n_resamples)
    observed = abs(d.mean())
    centred = (d - d.mean())[:, None]
    means = _resampled_means(centred, n_resamples, np.random.default_rng(seed))[:, 0]
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))
    hits = int(np.count_nonzero(np.abs(means) >= observed - tolerance))
    return (hits + 1) / (n_resamples + 1)


def paired_p_value(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    test: str = "t",
    n_resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
) -> float:
    """The p-value of the named paired test: ``t``, ``randomization`` or ``bootstrap``."""
    if test == "t":
        return paired_t_test(a, b)
    if test == "randomization":
        return paired_randomization_test(a, b, n_resamples, seed)
    if test == "bootstrap":
        return paired_bootstrap_test(a, b, n_resamples, seed)
    raise EvretError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")


def holm_bonferroni(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order (step-down, monotone, capped at 1)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return [float(v) for v in adjusted]


def cohens_d_paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Cohen's d for paired samples (d_z): mean difference over the standard deviation of the differences.

    0.0 when all differences are equal to zero; ±inf when they are all equal and non-zero.
    """
    d = _paired(a, b)
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    if sd == 0.0:
        return 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
    return mean / sd


# -- comparisons of runs -----------------------------------------------------------------------------------------
@dataclass
class PairComparison:
    """One metric compared between run ``a`` and run ``b`` (``delta`` = mean of b - mean of a)."""

    metric: str
    a: str
    b: str
    delta: float
    p_value: float
    test: str
    effect_size: float
    n: int
    p_adjusted: float = 1.0
    significant: bool = False
    gained: list[dict[str, Any]] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "a": self.a, "b": self.b, "delta": self.delta, "p_value": self.p_value,
            "p_adjusted": self.p_adjusted, "test": self.test, "significant": self.significant,
            "effect_size": _finite(self.effect_size), "n": self.n, "gained": self.gained, "lost": self.lost,
        }


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


@dataclass
class Comparison:
    """Every pairwise comparison of two or more runs, with Holm-Bonferroni correction over all of them."""

    runs: list[str]
    metrics: list[str]
    test: str
    alpha: float
    query_ids: list[str]
    pairs: list[PairComparison]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test, "alpha": self.alpha, "correction": "holm-bonferroni", "runs": self.runs,
            "metrics": self.metrics, "num_queries": len(self.query_ids), "warnings": self.warnings,
            "comparisons": [p.to_dict() for p in self.pairs],
        }


def compare_scores(
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    metrics: Sequence[str],
    test: str = "t",
    alpha: float = 0.05,
    n_resamples: int = DEFAULT_TEST_RESAMPLES,
    seed: int = 0,
    top: int = 5,
    intersection: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> Comparison:
    """Compare runs given as ``{run name: {query id: {metric: value}}}``, every pair of runs on every metric
    (``progress`` sees the stage ``compare``: tests done of all).

    The runs must score the same queries: otherwise an :class:`EvretError` names the difference, unless
    ``intersection`` is true, when the common queries are compared and a warning says how many were dropped.
    p-values are Holm-Bonferroni adjusted over all (metric, pair) comparisons made; ``gained``/``lost`` list the
    ``top`` queries whose score rose or fell most from a to b.
    """
    if test not in TESTS:
        raise EvretError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if not 0.0 < alpha < 1.0:
        raise EvretError(f"alpha must be between 0 and 1, got {alpha}")
    names = list(runs)
    if len(names) < 2:
        raise EvretError("a comparison needs at least two runs")
    warnings: list[str] = []
    id_sets = [set(runs[name]) for name in names]
    common = set.intersection(*id_sets)
    if any(ids != common for ids in id_sets):
        details = "; ".join(
            f"{name}: {len(ids)} queries, {len(ids - common)} not in every run"
            + (f" (e.g. {', '.join(sorted(ids - common)[:3])})" if ids - common else "")
            for name, ids in zip(names, id_sets, strict=True)
        )
        if not intersection:
            raise EvretError(f"the runs do not score the same queries ({details}); paired tests need the same "
                             f"queries (pass --intersection to compare on the {len(common)} common ones)")
        warnings.append(f"compared on the {len(common)} queries common to all runs; dropped others ({details})")
    if len(common) < 2:
        raise EvretError(f"the runs have {len(common)} queries in common; paired tests need at least 2")
    first_order = [q for q in runs[names[0]] if q in common]
    pairs: list[PairComparison] = []
    tests = len(metrics) * len(names) * (len(names) - 1) // 2
    if progress is not None:
        progress("compare", 0, tests)
    for metric in metrics:
        matrix = {}
        for name in names:
            try:
                matrix[name] = np.array([runs[name][q][metric] for q in first_order], dtype=np.float64)
            except KeyError:
                raise EvretError(f"run {name!r} has no per-query {metric!r} scores") from None
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                x, y = matrix[a], matrix[b]
                diff = y - x
                order = np.argsort(diff, kind="stable")
                gained = [{"query_id": first_order[j], "delta": float(diff[j])}
                          for j in order[::-1][:top] if diff[j] > 0]
                lost = [{"query_id": first_order[j], "delta": float(diff[j])} for j in order[:top] if diff[j] < 0]
                pairs.append(PairComparison(
                    metric=metric, a=a, b=b, delta=float(diff.mean()),
                    p_value=paired_p_value(x, y, test, n_resamples, seed), test=test,
                    effect_size=cohens_d_paired(x, y), n=int(diff.size), gained=gained, lost=lost,
                ))
                if progress is not None:
                    progress("compare", len(pairs), tests)
    for pair, adjusted in zip(pairs, holm_bonferroni([p.p_value for p in pairs]), strict=True):
        pair.p_adjusted = adjusted
        pair.significant = adjusted < alpha
    return Comparison(runs=names, metrics=list(metrics), test=test, alpha=alpha, query_ids=first_order,
                      pairs=pairs, warnings=warnings)


# -- slices ------------------------------------------------------------------------------------------------------
def natural_order(values: Iterable[str]) -> list[str]:
    """Tag values in the order tables list them: numerically when every value is an integer (``1, 2, 10``: turn
    indexes), else as strings."""
    values = list(values)
    if values and all(_INTEGER.fullmatch(v) for v in values):
        return sorted(values, key=lambda v: (int(v), v))
    return sorted(values)


def slice_scores(
    scores: Mapping[str, Sequence[float] | np.ndarray],
    tags: Sequence[Mapping[str, str]],
    confidence_level: float = DEFAULT_LEVEL,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    min_slice_size: int = 10,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Metrics per value of each tag: ``{tag: {value: {"n", "scores", "intervals", "small"}}}``.

    ``scores`` holds each metric's per-query values in the order of ``tags`` (one mapping per query). A query
    without a tag is in none of that tag's slices. Slices with fewer than ``min_slice_size`` queries are kept
    and flagged ``small``: their intervals are wide and their means unreliable. Values are listed in
    :func:`natural_order` (``1, 2, 10`` when every value is an integer).
    """
    names = list(scores)
    columns = {m: np.asarray(scores[m], dtype=np.float64) for m in names}
    keys = sorted({key for query_tags in tags for key in query_tags})
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key in keys:
        groups: dict[str, list[int]] = {}
        for i, query_tags in enumerate(tags):
            if key in query_tags:
                groups.setdefault(str(query_tags[key]), []).append(i)
        out[key] = {}
        for value in natural_order(groups):
            index = np.asarray(groups[value])
            sub = {m: columns[m][index] for m in names}
            out[key][value] = {
                "n": int(index.size),
                "scores": {m: float(sub[m].mean()) for m in names},
                "intervals": bootstrap_intervals(sub, confidence_level, n_resamples, seed),
                "small": bool(index.size < min_slice_size),
            }
    return out
