"""``evret agreement``: how well a judged qrels file agrees with a reference one, per label and per leaderboard.

The label level compares the grades of the pairs judged in both files; with ``--run`` (two or more) the
leaderboard level compares the systems' scores under each. Every figure carries a bootstrap interval over
queries; ``--json`` prints the one object :func:`evret_core.calibration.qrels_agreement.qrels_agreement` builds,
and the tables print the same numbers, rounded to 4 decimals.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.limits import check_bootstrap, check_float


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "agreement", help="agreement of a judged qrels file with a reference one (labels and leaderboards)",
        description="Compare a judged qrels file with a reference one: exact agreement, Cohen's kappa, weighted "
                    "kappas, Krippendorff's alpha and binary kappas on the pairs judged in both; with two or more "
                    "--run, the rank correlations of the systems' scores under each. Intervals: bootstrap over "
                    "queries.")
    p.add_argument("--reference", required=True, metavar="QRELS", help="the reference qrels (e.g. people's grades)")
    p.add_argument("--judged", required=True, metavar="QRELS", help="the qrels to measure (e.g. a judge's grades)")
    p.add_argument("--run", action="append", metavar="[NAME=]RUN",
                   help="a TREC run file, named by its file stem or NAME (repeatable; at least two)")
    p.add_argument("--metric", action="append", metavar="NAME[@K]",
                   help="leaderboard metric (repeatable; default: ndcg@10 precision@10 ap@100)")
    p.add_argument("--relevance-level", type=float, metavar="N",
                   help="for the leaderboard's metrics, a document is relevant when its grade is >= N "
                        "(default: grade > 0)")
    p.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples of the queries (1000)")
    p.add_argument("--confidence-level", type=float, default=0.95, help="level of the intervals (0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (0)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.set_defaults(func=run)


def _runs(specs: list[str]) -> dict[str, str]:
    """``[NAME=]PATH`` -> {name: path}; an EvretError for fewer than two or a repeated name."""
    runs: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or "/" in name:
            name, path = Path(spec).stem, spec
        if not path:
            raise EvretError(f"--run {spec!r}: no file named")
        if name in runs:
            raise EvretError(f"--run: two runs are named {name!r} (give one NAME=PATH)")
        runs[name] = path
    if len(runs) < 2:
        raise EvretError(f"--run: a leaderboard needs at least 2 runs, got {len(runs)}")
    return runs


def run(args: argparse.Namespace) -> int:
    from evret_core.calibration.qrels_agreement import qrels_agreement_of_files

    check_bootstrap(args.seed, args.n_resamples, args.confidence_level)
    if args.relevance_level is not None:
        check_float(args.relevance_level, "--relevance-level", -1e9, 1e9)
    paths = _runs(args.run) if args.run is not None else None
    result = qrels_agreement_of_files(args.reference, args.judged, paths, args.metric,
                                      args.relevance_level, args.n_resamples, args.confidence_level, args.seed)
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))  # every undefined figure is null with its reason
    else:
        print("\n".join(tables(result)))
    return 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _cells(fig: dict[str, Any]) -> list[str]:
    interval = fig.get("interval")
    shown = "-" if interval is None else f"[{_num(interval[0])}, {_num(interval[1])}]"
    return [_num(fig["value"]), shown, fig.get("reason", "")]


def tables(result: dict[str, Any]) -> list[str]:
    """The terminal lines of an agreement result: the label table, the confusion, each metric's leaderboard."""
    from evret_core.report.terminal import text_table

    level = result["bootstrap"]["confidence_level"]
    heading = ["figure", "value", f"{level:.0%} interval", ""]
    lines = [f"pairs judged in both: {result['pairs']} over {result['queries']} queries; only in --reference: "
             f"{result['only_reference']}; only in --judged: {result['only_judged']}",
             f"bootstrap: {result['bootstrap']['n_resamples']} resamples of the queries, seed "
             f"{result['bootstrap']['seed']}", ""]
    rows = [["exact_agreement", *_cells(result["exact_agreement"])],
            ["cohen_kappa", *_cells(result["cohen_kappa"])],
            ["weighted_kappa.linear", *_cells(result["weighted_kappa"]["linear"])],
            ["weighted_kappa.quadratic", *_cells(result["weighted_kappa"]["quadratic"])],
            ["krippendorff_alpha", *_cells(result["krippendorff_alpha"])]]
    for cut, entry in result["binary"].items():
        c = entry["confusion"]
        note = (f"reference+ {entry['reference_positive']}, judged+ {entry['judged_positive']}; tp {c['tp']} "
                f"fp {c['fp']} fn {c['fn']} tn {c['tn']}")
        value, interval, reason = _cells(entry["kappa"])
        rows.append([f"binary[>={cut}].kappa", value, interval, reason or note])
    lines += text_table(rows, heading, align="<>>")
    labels = [str(g) for g in result["confusion"]["labels"]]
    matrix = result["confusion"]["matrix"]
    lines += ["", "confusion (rows: reference, columns: judged)"]
    lines += text_table([[g, *(str(v) for v in row)] for g, row in zip(labels, matrix, strict=True)],
                        ["", *labels], align=">" * (len(labels) + 1))
    for metric, board in (result["leaderboard"] or {}).items():
        lines += ["", f"leaderboard: {metric}"]
        lines += text_table([[s["run"], _num(s["reference"]), _num(s["judged"])] for s in board["systems"]],
                            ["run", "reference", "judged"], align="<>>")
        stats = [[name, *_cells(board[name])] for name in ("kendall_tau", "tau_ap", "spearman_rho", "swap_rate")]
        stats.append(["ties", str(board["ties"]), "", ""])
        lines += text_table(stats, heading, align="<>>")
    return lines
