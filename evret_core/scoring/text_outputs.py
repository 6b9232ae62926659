"""The dependency-free output evaluator types: ``exact`` and ``regex``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.output import OutputEvaluator


class ExactOutputEvaluator(OutputEvaluator):
    """1.0 when the output and the target are the very same string, else 0.0: case-sensitive, no trimming."""

    name = "exact"
    needs_target = True

    def score_record(self, record: Mapping[str, Any]) -> float | None:
        return 1.0 if str(record["output"]) == str(record["target"]) else 0.0


class RegexOutputEvaluator(OutputEvaluator):
    """1.0 when ``pattern`` matches anywhere in the output (``re.search``), else 0.0. Needs no target.

    An invalid pattern is rejected when the evaluator is created, before any record is read.
    """

    name = "regex"
    needs_target = False

    def __init__(self, pattern: str | None = None, ignore_case: bool = False) -> None:
        if pattern is None:
            raise EvretError("evaluator 'regex': option 'pattern' is required, e.g. pattern='\\w+!'")
        if not isinstance(pattern, str):
            raise EvretError(f"evaluator 'regex': option 'pattern' must be a string, got {type(pattern).__name__}")
        try:
            self.regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise EvretError(f"evaluator 'regex': option 'pattern' {pattern!r} is not a valid regular expression: "
                             f"{exc}") from None
        self.pattern = pattern
        self.ignore_case = ignore_case

    def score_record(self, record: Mapping[str, Any]) -> float | None:
        return 1.0 if self.regex.search(str(record["output"])) else 0.0

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "pattern": self.pattern, "ignore_case": self.ignore_case}
