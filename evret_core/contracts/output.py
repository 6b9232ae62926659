"""Output evaluators: score what a pipeline produced, record by record, in 0..1.

A record is a mapping ``{"input": ..., "output": "...", "target": "..." or None, ...}``. An evaluator type
subclasses :class:`OutputEvaluator`, sets ``needs_target`` and implements :meth:`score_records` (or
:meth:`score_record`). A score of ``None`` means unmeasured: reported, never silently counted. The kind's contract
is :class:`RecordsEvaluator`: anything that scores records (the criteria judges are ones too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol

from evret_core.contracts.errors import EvretError
from evret_core.contracts.values import Value, as_dict, as_int, as_list, as_optional_float, as_str, value_type


@value_type(kw_only=True)
class OutputResults(Value):
    """Mean over the measured records, per-record scores (None when unmeasured) and details."""

    evaluator: str
    mean: float | None
    scores: list[float | None]
    details: list[dict[str, Any]] = field(default_factory=list)
    unmeasured: list[int] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "evaluator", as_str(self.evaluator, "evaluator"))
        object.__setattr__(self, "mean", as_optional_float(self.mean, "mean"))
        object.__setattr__(self, "scores", as_list(self.scores, "scores", as_optional_float))
        object.__setattr__(self, "details", as_list(self.details, "details", as_dict))
        object.__setattr__(self, "unmeasured", as_list(self.unmeasured, "unmeasured", as_int))
        object.__setattr__(self, "stats", as_dict(self.stats, "stats"))


class OutputEvaluator:
    """Base class of the output evaluator types (``exact``, ``regex``, ``semantic-similarity``, ``llm-score``)."""

    name: str = "output"
    needs_target: bool = False

    def validate(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Fail before any work when a record lacks what this evaluator needs; the error names the record."""
        for i, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise EvretError(f"record {i + 1}: expected an object, got {type(record).__name__}")
            if "output" not in record or record["output"] is None:
                raise EvretError(f"record {i + 1}: field 'output' is missing")
            if self.needs_target and record.get("target") is None:
                raise EvretError(f"record {i + 1}: evaluator {self.name!r} needs a 'target', and it is missing")

    def score_record(self, record: Mapping[str, Any]) -> float | None:
        raise NotImplementedError

    def score_records(self, records: Sequence[Mapping[str, Any]]) -> tuple[list[float | None], list[dict[str, Any]]]:
        """Scores and per-record details; the default scores one by one."""
        return [self.score_record(r) for r in records], [{} for _ in records]

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> OutputResults:
        records = list(records)
        self.validate(records)
        scores, details = self.score_records(records)
        measured = [s for s in scores if s is not None]
        return OutputResults(
            evaluator=self.name,
            mean=(sum(measured) / len(measured)) if measured else None,
            scores=scores,
            details=details,
            unmeasured=[i for i, s in enumerate(scores) if s is None],
        )

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class RecordsEvaluator(Protocol):
    """What an output evaluator is (``create_evaluator`` builds one): it scores records (pipeline outputs).
    :class:`~evret_core.contracts.output.OutputEvaluator` and the criteria judges are ones."""

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> Any: ...
