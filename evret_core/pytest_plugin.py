"""Evret's pytest plugin (entry point ``pytest11``): retrieval quality as ordinary test assertions.

- ``evret_evaluate``: a session fixture; ``evret_evaluate(dataset, retriever, metrics=[...], judge=..., **options)``
  runs the evaluation once per session for the same arguments and returns the
  :class:`~evret_core.results.evaluation.EvaluationResults` (later calls with equal arguments reuse them).
- ``assert_metric(results, "recall@5", at_least=0.8)`` and
  ``assert_no_regression(results, baseline, metrics=[...])``: failures show the score, its interval, the
  baseline and the worst queries.
- LLM judgments are cached between test runs in pytest's cache directory (``.pytest_cache/d/evret``) unless
  ``EVRET_CACHE_DIR`` is set.

The plugin imports nothing heavy until a fixture or assertion is used, so it costs nothing to test suites that
do not use it. It works in async tests (pytest-asyncio) and inside a running event loop: the evaluator runs
async judges and retrievers on its own loop when one is already running.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["assert_metric", "assert_no_regression"]


def _worst_text(worst: Sequence[tuple[str, float]], what: str) -> str:
    if not worst:
        return ""
    return f"\n  {what}: " + ", ".join(f"{qid} ({value:+.4f})" if what.startswith("largest") else
                                      f"{qid} ({value:.4f})" for qid, value in worst)


def assert_metric(results: Any, metric: str, at_least: float | None = None, at_most: float | None = None,
                  worst: int = 5) -> None:
    """Fail unless ``results.scores[metric]`` is within ``[at_least, at_most]``; the message shows the score,
    its interval and the ``worst`` lowest-scoring queries."""
    from evret_core.results.gates import worst_queries

    __tracebackhide__ = True
    if at_least is None and at_most is None:
        raise ValueError("assert_metric needs at_least or at_most")
    if metric not in results.scores:
        raise AssertionError(f"{metric} was not computed (the results have: {', '.join(results.scores)})")
    value = float(results.scores[metric])
    interval = (results.intervals or {}).get(metric)
    shown = f"{metric} = {value:.4f}" + (f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else "")
    shown += f" over {len(results.per_query_scores())} queries"
    if at_least is not None and not value >= at_least:
        raise AssertionError(f"{shown} is below {at_least:g}"
                             + _worst_text(worst_queries(results, metric, worst), "worst queries"))
    if at_most is not None and not value <= at_most:
        raise AssertionError(f"{shown} is above {at_most:g}")


def assert_no_regression(results: Any, baseline: Any, metrics: Sequence[str] | None = None, alpha: float = 0.05,
                         min_effect: float = 0.0, test: str = "randomization", worst: int = 5) -> None:
    """Fail when a metric is significantly worse than in ``baseline`` (a results object or a results file path)
    by at least ``min_effect``; the message shows both scores with intervals, the p-value and the queries that
    fell most."""
    from evret_core.results.files import load_results
    from evret_core.results.gates import check_regression

    __tracebackhide__ = True
    if isinstance(baseline, (str, Path)):
        baseline = load_results(Path(baseline), kind="retrieval")
    failures = check_regression(results, baseline, metrics=metrics, alpha=alpha, min_effect=min_effect, test=test,
                                worst=worst)
    if failures:
        raise AssertionError("\n".join(f"{f.metric}: {f.reason}" + _worst_text(f.worst, "largest drops")
                                       for f in failures))


def _key(value: Any, held: list[Any]) -> Any:
    """A hashable stand-in for an argument: data sets by content, objects by identity, the rest by value.

    An object keyed by ``id()`` is appended to ``held``, which the cache keeps with the results: while it is held
    its id cannot be given to another object, so a new retriever never gets a freed one's results."""
    content_hash = getattr(value, "content_hash", None)
    if callable(content_hash):
        return ("dataset", content_hash())
    if isinstance(value, (str, int, float, bool, type(None), Path)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_key(v, held) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _key(v, held)) for k, v in value.items()))
    held.append(value)
    return ("object", id(value))


class SessionEvaluations:
    """``evret_evaluate``'s cache: one evaluation per distinct arguments for the session.

    Each entry keeps the objects its key names by identity (the retriever, a judge object), so an ``id()`` in a
    key always belongs to the object it was made from (red-team P05: keyed on bare ``id()``, a retriever
    allocated at a freed one's address got the freed one's results)."""

    def __init__(self) -> None:
        self.done: dict[Any, tuple[Any, list[Any]]] = {}

    def __call__(self, dataset: Any, retriever: Any, metrics: Sequence[str], judge: Any = None,
                 **options: Any) -> Any:
        from evret_core.evaluation.evaluator import Evaluator
        from evret_core.io.datasets import EvaluationDataset

        if isinstance(dataset, (str, Path)):
            dataset = EvaluationDataset.load(dataset)
        held: list[Any] = []
        key = (_key(dataset, held), _key(retriever, held), _key(list(metrics), held), _key(judge, held),
               _key(options, held))
        entry = self.done.get(key)
        if entry is None:
            results = Evaluator(retriever, metrics=list(metrics), judge=judge, **options).evaluate(dataset)
            entry = self.done[key] = (results, held)
        return entry[0]


@pytest.fixture(scope="session")
def evret_cache_dir(request: pytest.FixtureRequest) -> Iterator[Path]:
    """Where LLM judgments are cached between test runs: ``EVRET_CACHE_DIR`` if set, else pytest's cache."""
    configured = os.environ.get("EVRET_CACHE_DIR")
    if configured:
        yield Path(configured)
        return
    cache = getattr(request.config, "cache", None)
    path = Path(cache.mkdir("evret")) if cache is not None else Path(".pytest_cache") / "evret"
    path.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVRET_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def evret_evaluate(evret_cache_dir: Path) -> Callable[..., Any]:
    """``evret_evaluate(dataset, retriever, metrics=[...], judge=None, **evaluator_options)`` -> results, run once
    per session for equal arguments (a dataset path or object, the same retriever object, the same options)."""
    return SessionEvaluations()
