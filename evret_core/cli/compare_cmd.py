"""``evret compare``: paired significance tests between two or more results files on the same queries."""

from __future__ import annotations

import argparse
import json
import sys


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
    from evret_core.progress import with_terminal_progress

    return with_terminal_progress(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from evret_core.contracts.errors import EvretError, visible
    from evret_core.limits import MAX_RESAMPLES, MAX_SEED, check_float, check_int
    from evret_core.report.api import any_runs, compare
    from evret_core.report.terminal import print_comparison

    if len(args.results) < 2:
        raise EvretError("evret compare needs at least two results files")
    check_float(args.alpha, "--alpha", 0.0, 1.0, open_interval=True)
    check_int(args.n_resamples, "--n-resamples", 1, MAX_RESAMPLES)
    check_int(args.seed, "--seed", 0, MAX_SEED)
    runs = any_runs(tuple(args.results))  # retrieval or RAG runs, not mixed; redacted (results written before redaction)
    comparison = compare(runs, test=args.test, alpha=args.alpha, n_resamples=args.n_resamples,
                         seed=args.seed, intersection=args.intersection)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=2))
        for warning in comparison.warnings:
            print(f"WARNING: {visible(warning)}", file=sys.stderr)
        return 0
    from evret_core.results.evaluation import EvaluationResults

    scores, intervals = {}, {}
    for name, r in runs.items():
        if isinstance(r, EvaluationResults):  # its means as they are: no per-query view to build again
            scores[name], intervals[name] = r.scores, r.intervals
        else:
            view = r.score_view()
            scores[name], intervals[name] = view.scores, view.intervals
    print_comparison(comparison, scores, intervals)
    return 0
