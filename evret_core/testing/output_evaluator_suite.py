"""The output evaluator contract, as tests: an evaluator plugin's test class subclasses
:class:`OutputEvaluatorConformance`.

What ``evret score`` and the Python API rely on: ``evaluate(records)`` returns results that ``evret score`` reads
(``rows()``, or ``scores`` with one score per record, in 0..1 or None, and ``mean`` over the measured ones), the
same per record whether the records are scored together, one at a time or in another order; a record that lacks
a field the evaluator needs is an :class:`~evret_core.contracts.errors.EvretError` naming the record, before any work; and
``config()``, when there is one, is JSON with the name.

Scores of a model (an embedding's cosine, say) move with the batch they were computed in: a batched encode pads
and sums in another order, so one record scored alone and among others can differ by float rounding (1.0 against
0.99999997 in float32). The suite compares such scores within :attr:`OutputEvaluatorConformance.tolerance`;
whether a record is measured at all (a score or None) must agree exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.testing.suite import Conformance


def record_scores(evaluator_name: str, results: Any, records: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Each record's row score as ``evret score`` writes it (checked the way ``evret score`` checks results)."""
    from evret_core.cli.score import check_results, result_rows

    check_results(evaluator_name, results, len(records))
    rows = result_rows(results, [dict(r) for r in records])
    assert [row["record"] for row in rows] == list(range(1, len(records) + 1))
    return [row.get("score") for row in rows]


def assert_scores_agree(got: Sequence[Any], want: Sequence[Any], tolerance: float) -> None:
    """The same records measured (None where unmeasured), with scores no more than ``tolerance`` apart."""
    assert [s is None for s in got] == [s is None for s in want], (got, want)
    assert [s for s in got if s is not None] == pytest.approx([s for s in want if s is not None], abs=tolerance, rel=0)


class OutputEvaluatorConformance(Conformance):
    """Tests every output evaluator must pass. Override the ``evaluator`` fixture, and ``records`` (at least two,
    which your evaluator scores differently) and ``incomplete_record`` (one lacking a field it needs) when the
    defaults (``output`` and ``target`` strings) do not suit it. ``tolerance`` bounds how far one record's score
    may move with the batch it is scored in (float rounding of a model; 0 for exact arithmetic)."""

    kind = kinds.EVALUATOR

    @pytest.fixture
    def subject(self, evaluator: Any) -> Any:
        return evaluator

    tolerance: float = 1e-6

    @pytest.fixture
    def evaluator(self) -> Any:
        raise NotImplementedError("override the `evaluator` fixture to return the evaluator under test")

    @pytest.fixture
    def records(self) -> list[dict[str, Any]]:
        return [
            {"input": "What is the capital of France?", "output": "Paris", "target": "Paris"},
            {"input": "How many legs does a spider have?", "output": "Six", "target": "Eight"},
            {"input": "What is the capital of Italy?", "output": "Rome", "target": "Rome"},
        ]

    @pytest.fixture
    def incomplete_record(self) -> dict[str, Any]:
        return {"input": "What is the capital of Spain?", "target": "Madrid"}  # no output

    def name_of(self, evaluator: Any) -> str:
        return str(getattr(evaluator, "name", type(evaluator).__name__))

    def test_a_config_is_json_with_the_name(self, evaluator: Any) -> None:
        # optional: the criteria judges have neither name nor config (results say which criterion they judged)
        if not hasattr(evaluator, "config"):
            pytest.skip("no config(): nothing to check")
        assert isinstance(evaluator.name, str) and evaluator.name
        config = evaluator.config()
        assert config["name"] == evaluator.name
        json.dumps(config)

    def test_results_are_what_evret_score_reads(self, evaluator: Any, records: list[dict[str, Any]]) -> None:
        results = evaluator.evaluate(records)
        scores = record_scores(self.name_of(evaluator), results, records)
        assert all(s is None or (isinstance(s, float) and 0.0 <= s <= 1.0) for s in scores), scores
        if not hasattr(results, "rows"):
            measured = [s for s in scores if s is not None]
            mean = results.mean
            assert (mean is None) if not measured else mean == pytest.approx(sum(measured) / len(measured))
            if hasattr(results, "unmeasured"):
                assert list(results.unmeasured) == [i for i, s in enumerate(scores) if s is None]

    def test_records_are_told_apart(self, evaluator: Any, records: list[dict[str, Any]]) -> None:
        # the default records: a right and a wrong answer; a suite that scores them alike checks nothing
        results = evaluator.evaluate(records)
        rows = results.rows() if hasattr(results, "rows") else [{"score": s} for s in results.scores]
        assert len({json.dumps(r, sort_keys=True, default=str) for r in rows}) > 1

    def test_together_one_at_a_time_and_reversed_agree(self, evaluator: Any, records: list[dict[str, Any]]) -> None:
        name = self.name_of(evaluator)
        together = record_scores(name, evaluator.evaluate(records), records)
        alone = [record_scores(name, evaluator.evaluate([r]), [r])[0] for r in records]
        assert_scores_agree(alone, together, self.tolerance)
        reversed_ = record_scores(name, evaluator.evaluate(records[::-1]), records[::-1])
        assert_scores_agree(reversed_, together[::-1], self.tolerance)

    def test_a_record_missing_a_field_is_an_error_naming_it(
        self, evaluator: Any, records: list[dict[str, Any]], incomplete_record: dict[str, Any]
    ) -> None:
        with pytest.raises(EvretError, match=rf"record {len(records) + 1}\b"):
            evaluator.evaluate([*records, incomplete_record])

    def test_a_record_that_is_not_an_object_is_an_error(self, evaluator: Any, records: list[dict[str, Any]]) -> None:
        with pytest.raises(EvretError, match=r"record 2\b"):
            evaluator.evaluate([records[0], "just a string"])
