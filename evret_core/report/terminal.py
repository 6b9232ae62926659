"""Plain-text tables for the terminal."""

from __future__ import annotations

import sys
from typing import TextIO

from evret_core.results import EvaluationResults


def print_scores(results: EvaluationResults, title: str | None = None, file: TextIO | None = None) -> None:
    """A two-column table of metric means, followed by unmeasured judgments when there are any."""
    out = file or sys.stdout
    if title:
        print(title, file=out)
    width = max((len(m) for m in results.metrics), default=6)
    print(f"{'metric'.ljust(width)}  value", file=out)
    print(f"{'-' * width}  ------", file=out)
    for metric in results.metrics:
        print(f"{metric.ljust(width)}  {results.scores[metric]:.4f}", file=out)
    unmeasured = results.stats.get("unmeasured", {})
    if unmeasured.get("judgments"):
        print(
            f"WARNING: {unmeasured['judgments']} judgment(s) unmeasured in {len(unmeasured['queries'])} "
            f"queries (counted as {unmeasured.get('counted_as', 'not matching')})",
            file=out,
        )
