"""The regression-gate options shared by ``evret evaluate`` and ``evret rag``; a failed gate exits 1."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import EvretError

GATE_FAILED = 1
"""The exit status of a failed gate (bad input stays 2)."""


def add_gate_arguments(p: argparse.ArgumentParser, example: str = "recall@5=0.8") -> None:
    g = p.add_argument_group("regression gates (exit 1 when one fails)")
    g.add_argument("--fail-under", action="append", metavar="METRIC=VALUE",
                   help=f"fail when the metric's mean is under VALUE, e.g. {example} (repeatable)")
    g.add_argument("--baseline", metavar="RESULTS.json",
                   help="fail when a metric is significantly worse than in this earlier results file")
    g.add_argument("--gate-metric", action="append", metavar="METRIC",
                   help="metrics the baseline gate checks (repeatable; default every metric both runs have)")
    g.add_argument("--gate-alpha", type=float, default=0.05, help="significance level of the baseline gate")
    g.add_argument("--min-effect", type=float, default=0.0,
                   help="a significant drop smaller than this does not fail the gate (default 0)")
    g.add_argument("--gate-test", choices=["t", "randomization", "bootstrap"], default="randomization",
                   help="paired test of the baseline gate (default randomization)")


def check_gate_arguments(args: argparse.Namespace, known: Sequence[str] | None = None,
                         add: str = "--metric") -> dict[str, float]:
    """Validate the gate options before any work; returns the parsed floors. ``known`` is every score the run
    will compute (known from its settings): a --fail-under or --gate-metric naming another fails now, naming
    ``add`` (the option that adds scores), instead of after the whole run."""
    from evret_core.limits import check_float
    from evret_core.results.gates import parse_fail_under

    floors = parse_fail_under(args.fail_under or [])
    check_float(args.gate_alpha, "--gate-alpha", 0.0, 1.0, open_interval=True)
    check_float(args.min_effect, "--min-effect", 0.0, 1e9)
    if known is not None:
        for flag, names in (("--fail-under", list(floors)), ("--gate-metric", args.gate_metric or [])):
            unknown = [m for m in names if m not in known]
            if unknown:
                raise EvretError(f"{flag} names {', '.join(unknown)}, which this run does not compute"
                                 f"{_hint(unknown[0], known)}; add {add}")
    return floors


def _hint(name: str, known: Sequence[str]) -> str:
    """The likeliest meant name, else the names the run computes when they are few."""
    from evret_core.contracts.errors import did_you_mean

    meant = did_you_mean(name, known)
    if meant:
        return meant
    return f" (it computes {', '.join(known)})" if len(known) <= 12 else ""


def run_gates(args: argparse.Namespace, floors: dict[str, float], run: Any, load_baseline: Any) -> int:
    """Check the gates on ``run`` (a gate view); ``load_baseline(path)`` reads the baseline into the same view.
    Prints one line per failed gate on stderr; returns 0 or :data:`GATE_FAILED`."""
    from evret_core.results.gates import check_gates

    if not floors and not args.baseline:
        return 0
    baseline = load_baseline(args.baseline) if args.baseline else None
    report = check_gates(run, floors, baseline, metrics=args.gate_metric, alpha=args.gate_alpha,
                         min_effect=args.min_effect, test=args.gate_test)
    for line in report.lines():
        print(line, file=sys.stderr)
    if report.passed:
        print(f"gates passed: {', '.join(report.checked)}", file=sys.stderr)
        return 0
    return GATE_FAILED
