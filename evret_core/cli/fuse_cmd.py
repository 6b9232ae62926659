"""``evret fuse RUN RUN... -o OUT``: fuse TREC run files into one TREC run (:mod:`evret_core.retrieve.fusion`, ranx's
methods and normalisations, scores equal to ranx's ``fuse``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.limits import MAX_DEPTH

# the names of evret_core.retrieve.fusion's METHODS and NORMS, which --help lists without loading numpy
# (tests/cli/test_fuse_cmd.py checks they are the same)
METHOD_NAMES = ("rrf", "isr", "sum", "mnz", "anz", "max", "min", "wsum", "wmnz")
NORM_NAMES = ("none", "min-max", "max", "sum", "zmuv", "rank")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "fuse", help="fuse TREC run files (RRF, CombSUM, CombMNZ, weighted sums...) into one run",
        description="Fuse TREC run files into one TREC run with ranx's fusion methods and normalisations (scores "
                    "equal to ranx's fuse). Each run's ranking of a query is score descending, ties by document "
                    "id descending (trec_eval's order); a query missing from a run is that run retrieving nothing.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="TREC run files (at least two): query_id Q0 doc_id rank "
                                                          "score tag")
    p.add_argument("--method", default="rrf", choices=METHOD_NAMES, help="fusion method (default: rrf)")
    p.add_argument("--norm", default="min-max", choices=NORM_NAMES,
                   help="how each run's scores are normalised per query before fusing (default: min-max; rrf and "
                        "isr read ranks only)")
    p.add_argument("--weights", nargs="+", type=float, metavar="W",
                   help="one weight per run, for --method wsum or wmnz (default: 1 each)")
    p.add_argument("--rrf-k", type=float, default=60.0, metavar="K", help="rrf's k (default: 60)")
    p.add_argument("--depth", type=int, metavar="K",
                   help="fuse each run's top K documents per query (default: all it lists)")
    p.add_argument("--tag", default="evret-fuse", help="the run tag written in the last column (default: "
                                                      "evret-fuse)")
    p.add_argument("-o", "--output", required=True, help="the fused TREC run file (- for standard output)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # numpy, the run reader and the output writer load only when the command runs (`evret --help` stays light)
    from evret_core.io.outputs import check_outputs
    from evret_core.io.trec import ranked_docs, read_run, write_run
    from evret_core.retrieve.fusion import FusionSettings, fuse_runs

    if len(args.runs) < 2:
        raise EvretError(f"evret fuse needs at least two run files, got {len(args.runs)}")
    settings = FusionSettings.check(args.method, args.norm, args.weights, args.rrf_k, n_runs=len(args.runs),
                                    where="evret fuse")
    if args.depth is not None and not 1 <= args.depth <= MAX_DEPTH:
        raise EvretError(f"evret fuse: option --depth must be an integer from 1 to {MAX_DEPTH}, got {args.depth}")
    if not args.tag or any(c.isspace() for c in args.tag):
        raise EvretError(f"evret fuse: option --tag must be a non-empty word without spaces, got {args.tag!r}")
    check_outputs({"--output": args.output}, inputs=args.runs)
    runs: list[Any] = [read_run(path) for path in args.runs]  # a bad line is an error naming its file and line
    if args.depth is not None:
        runs = [{qid: {doc: scores[doc] for doc in ranked_docs(scores)[:args.depth]} for qid, scores in r.items()}
                for r in runs]
    fused = fuse_runs(runs, method=settings.method, norm=settings.norm, weights=settings.weights,
                      rrf_k=settings.rrf_k)
    write_run(args.output, fused, tag=args.tag)
    documents = sum(map(len, fused.values()))
    where = "standard output" if args.output == "-" else args.output
    print(f"fused {len(runs)} runs ({settings.method}"
          f"{'' if settings.method in ('rrf', 'isr') else f', norm {settings.norm}'}): {len(fused)} queries, "
          f"{documents} documents -> {where}", file=sys.stderr)
    return 0
