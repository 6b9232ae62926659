"""``evret compare``: paired significance tests between two or more results files on the same queries."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evret_core.results.rag_results import RagResults


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compare", help="compare results files with paired significance tests")
    p.add_argument("results", nargs="+", metavar="RESULTS.json", help="two or more results files")
    p.add_argument("--test", choices=["t", "randomization", "bootstrap"], default="t",
                   help="paired test (default: t)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after correction (default 0.05)")
    p.add_argument("--n-resamples", type=int, default=10000,
                   help="resamples of the randomization and bootstrap tests (default 10000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the resampling tests (default 0)")
    p.add_argument("--intersection", action="store_true",
                   help="when the runs score different queries, compare on the common ones instead of failing")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from evret_core.errors import EvretError
    from evret_core.limits import MAX_RESAMPLES, MAX_SEED, check_float, check_int
    from evret_core.report.api import compare
    from evret_core.report.terminal import print_comparison
    from evret_core.results.evaluation import EvaluationResults
    from evret_core.results.files import load_runs
    from evret_core.results.rag_results import RagResults
    from evret_core.results.redact import redact_results

    if len(args.results) < 2:
        raise EvretError("evret compare needs at least two results files")
    check_float(args.alpha, "--alpha", 0.0, 1.0, open_interval=True)
    check_int(args.n_resamples, "--n-resamples", 1, MAX_RESAMPLES)
    check_int(args.seed, "--seed", 0, MAX_SEED)
    loaded = load_runs(args.results)  # either kind, not mixed
    if all(isinstance(r, RagResults) for r in loaded.values()):
        return _compare_rag(args, {n: r for n, r in loaded.items() if isinstance(r, RagResults)})
    # files read here are redacted (results written before redaction)
    runs = {n: redact_results(r) for n, r in loaded.items() if isinstance(r, EvaluationResults)}
    comparison = compare(runs, test=args.test, alpha=args.alpha, n_resamples=args.n_resamples,
                         seed=args.seed, intersection=args.intersection)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
        for warning in comparison.warnings:
            print(f"WARNING: {warning}", file=sys.stderr)
        return 0
    views = {n: r.score_view() for n, r in runs.items()}
    print_comparison(comparison, {n: v.scores for n, v in views.items()}, {n: v.intervals for n, v in views.items()})
    return 0


def _compare_rag(args: argparse.Namespace, runs: dict[str, RagResults]) -> int:
    from evret_core.report.rag_compare import compare_rag
    from evret_core.report.terminal import print_comparison

    comparison = compare_rag(runs, test=args.test, alpha=args.alpha, n_resamples=args.n_resamples, seed=args.seed)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
        return 0
    views = {n: r.score_view() for n, r in runs.items()}
    print_comparison(comparison, {n: v.scores for n, v in views.items()}, {n: v.intervals for n, v in views.items()})
    return 0
