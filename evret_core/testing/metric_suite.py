"""The metric contract, as tests: a metric plugin's test class subclasses :class:`MetricConformance`.

What the core relies on: ``create_metric(name)`` rebuilds a metric from its ``name``; ``compute(batch)`` gives one
float64 per query, within the family's declared ``value_range``; a query's value does not depend on the other
queries of its batch (the evaluator and the executors compute in chunks and concatenate) and equals
:meth:`~evret_core.contracts.metric.Metric.score` of that query alone; ``@k`` reads the top ``k`` documents only; a bad
cutoff is an :class:`~evret_core.contracts.errors.EvretError` naming the family; and the values on a small known case are
trec_eval's (each subclass states them).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.contracts.metric import Metric, RankedBatch
from evret_core.testing.suite import Conformance

KNOWN_RANKING = ["n1", "r1", "n2", "r2", "n3"]
"""The known case's ranking: judged non-relevant ``n1``, ``n2``, relevant ``r1``, ``r2``, unjudged ``n3``."""

KNOWN_QRELS = {"r1": 1, "r2": 1, "r3": 1, "n1": 0, "n2": 0}
"""The known case's judgments: three relevant documents (``r3`` is not retrieved), two judged non-relevant."""


def random_case(seed: int, n: int = 40) -> tuple[list[list[str]], list[dict[str, int]]]:
    """``n`` rankings and graded judgments drawn with ``seed``: empty and short rankings, unjudged documents, grades
    0 to 3, queries with no relevant document."""
    rng = np.random.default_rng(seed)
    rankings, qrels = [], []
    for _ in range(n):
        rankings.append([f"d{j}" for j in rng.permutation(30)[: int(rng.integers(0, 15))]])
        judged = rng.choice(30, size=int(rng.integers(1, 10)), replace=False)
        qrels.append({f"d{j}": int(rng.integers(0, 4)) for j in judged})
    return rankings, qrels


class MetricConformance(Conformance):
    """Set ``family`` (the registered family name) and ``known`` (metric name -> its value on
    :data:`KNOWN_RANKING` against :data:`KNOWN_QRELS`, trec_eval's where trec_eval has the measure); ``cutoffs``
    are the ``k`` tried for families that take one."""

    kind = kinds.METRIC

    @pytest.fixture
    def subject(self) -> Any:
        return self.make(self.names()[0])

    @pytest.fixture
    def registered_name(self) -> str | None:
        return self.family

    family: ClassVar[str] = ""
    known: ClassVar[dict[str, float]] = {}
    cutoffs: ClassVar[tuple[int, ...]] = (1, 3, 10)
    options: ClassVar[str] = ""
    """Options written after each name tried, such as ``"(max_grade=3)"``."""

    def make(self, name: str) -> Metric:
        from evret_core.plugins.registry import create_metric

        metric: Metric = create_metric(name)
        return metric

    def names(self) -> list[str]:
        """The names tried: the family alone (unless it needs a cutoff) and with each of ``cutoffs`` (if it takes
        one)."""
        if not self.family:
            raise NotImplementedError("set `family` to the registered metric family")
        try:
            probe = self.make(self.family)
        except EvretError:  # the family needs a cutoff
            probe = self.make(f"{self.family}@{self.cutoffs[0]}")
        with_k = [f"{self.family}@{k}{self.options}" for k in self.cutoffs] if probe.allows_k else []
        return with_k if probe.requires_k else [f"{self.family}{self.options}", *with_k]

    @pytest.fixture
    def batch(self) -> tuple[list[list[str]], list[dict[str, int]], RankedBatch]:
        rankings, qrels = random_case(seed=11)
        return rankings, qrels, RankedBatch.from_rankings(rankings, qrels)

    def test_name_rebuilds_the_metric(self) -> None:
        for name in self.names():
            metric = self.make(name)
            assert metric.name == name and metric.family == self.family
            assert self.make(metric.name).name == name
            assert metric.config()["name"] == name

    def test_known_case(self) -> None:
        assert self.known, "state the family's values on the known case in `known`"
        for name, value in self.known.items():
            assert self.make(name).score(KNOWN_RANKING, KNOWN_QRELS) == pytest.approx(value, abs=1e-12), name

    def test_one_float_per_query_within_the_declared_range(self, batch: Any) -> None:
        _, _, ranked = batch
        for name in self.names():
            metric = self.make(name)
            values = metric.compute(ranked)
            assert isinstance(values, np.ndarray) and values.dtype == np.float64 and values.shape == (40,), name
            assert np.isfinite(values).all(), f"{name}: NaN or infinite values"
            assert metric.value_range is not None, f"{name}: declare value_range"
            low, high = metric.value_range
            assert ((values >= low) & (values <= high)).all(), f"{name}: values outside {metric.value_range}"

    def test_vectorised_agrees_with_each_query_alone(self, batch: Any) -> None:
        rankings, qrels, ranked = batch
        for name in self.names():
            metric = self.make(name)
            values = metric.compute(ranked)
            alone = [metric.score(r, q) for r, q in zip(rankings, qrels, strict=True)]
            np.testing.assert_allclose(values, alone, rtol=0, atol=1e-12, err_msg=name)
            chunked = np.concatenate([metric.compute(ranked[s : s + 7]) for s in range(0, 40, 7)])
            np.testing.assert_array_equal(chunked, values, err_msg=f"{name}: chunks differ from the whole")

    def test_cutoff_reads_only_the_top_k(self, batch: Any) -> None:
        """A metric reads no rank below its ``depth`` (its cutoff, unless it declares that it reads the whole
        ranking, as the condensed measures do: the engine then keeps every rank for it)."""
        rankings, qrels, _ = batch
        for name in self.names():
            metric = self.make(name)
            if metric.k is None or metric.depth is None:
                continue
            k = metric.depth
            shuffled = [r[:k] + r[k:][::-1] for r in rankings]  # the same top k, the rest in another order
            for a, b, q in zip(rankings, shuffled, qrels, strict=True):
                assert metric.score(a, q) == metric.score(b, q), f"{name} reads below rank {k}"

    def test_bad_cutoffs_are_errors_naming_the_family(self) -> None:
        names = self.names()
        if any("@" in n for n in names):
            for bad in ("0", "-2", "x"):
                with pytest.raises(EvretError, match=self.family):
                    self.make(f"{self.family}@{bad}")
        else:
            with pytest.raises(EvretError, match=self.family):
                self.make(f"{self.family}@5")

    def test_no_queries_no_values(self) -> None:
        empty = RankedBatch.from_rankings([], [])
        for name in self.names():
            assert self.make(name).compute(empty).shape == (0,)

    def test_usable_by_the_evaluator(self) -> None:
        from evret_core.evaluation.evaluator import Evaluator
        from evret_core.io.datasets import EvaluationDataset
        from evret_core.io.queries import QueryExample

        rankings, qrels = random_case(seed=5, n=8)
        qrels = [{d: g for d, g in q.items() if g > 0} or {"d0": 1} for q in qrels]  # id-labelled: relevant ids
        dataset = EvaluationDataset(queries=[QueryExample(query_id=f"q{i}", query_text=f"query {i}",
                                                          relevant_doc_ids=sorted(q)) for i, q in enumerate(qrels)])
        run = {f"q{i}": [{"doc_id": d, "score": float(len(r) - j)} for j, d in enumerate(r)]
               for i, r in enumerate(rankings)}
        names = self.names()
        results = Evaluator(run, metrics=names, k=20).evaluate(dataset)  # every document of each ranking
        for i, (ranking, q) in enumerate(zip(rankings, qrels, strict=True)):
            for name in names:
                assert results.per_query[f"q{i}"].scores[name] == pytest.approx(
                    self.make(name).score(ranking, sorted(q)), abs=1e-12), (name, i)
