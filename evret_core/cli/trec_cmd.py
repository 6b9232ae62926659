"""``evret trec QRELS RUN``: score a TREC run file against a qrels file, printing a trec_eval-like table.

With ``--shards N`` or ``--executor NAME`` the run file is scored in shards (``evaluate_run_file``): each shard
reads its own byte range, so no process holds the whole run, and an executor with ``map_shards`` (``ray``, from
evret-ray) scores them in parallel. The output is the same table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

DEFAULT_METRICS = [
    "num_ret", "num_rel", "num_rel_ret", "ap", "r_precision", "bpref", "mrr",
    "precision@5", "precision@10", "recall@100", "ndcg@10", "ndcg",
]
# trec_eval prints these summed over queries in its `all` rows, not averaged
COUNT_FAMILIES = {"num_ret", "num_rel", "num_rel_ret"}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "trec", help="score a TREC run file against qrels, trec_eval-style",
        description="Score a TREC run against TREC qrels with trec_eval's semantics.",
    )
    p.add_argument("qrels", metavar="QRELS", help="qrels file: query_id iteration doc_id grade")
    p.add_argument("run", metavar="RUN", help="run file: query_id Q0 doc_id rank score run_tag")
    p.add_argument("-m", "--metric", action="append", metavar="NAME[@K]",
                   help=f"metric, e.g. ndcg@10 (repeatable; default: {' '.join(DEFAULT_METRICS)})")
    p.add_argument("-q", "--per-query", action="store_true", help="print every query's values, then `all`")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("-c", "--complete", action="store_true",
                   help="score every judged query; queries missing from the run score 0 (trec_eval -c)")
    p.add_argument("-l", "--relevance-level", type=float, metavar="N",
                   help="a document is relevant when its grade is >= N (trec_eval -l; default: grade > 0)")
    p.add_argument("--shards", type=int, metavar="N",
                   help="score the run file in N shards (1 to 10,000; fewer when the run has fewer queries), each "
                        "reading only its part (default with --executor: one per 256 MiB); the run's lines of one "
                        "query must be adjacent")
    p.add_argument("--executor", help="where the shards run: local (default, one after another) or a plugin's "
                                      "executor, e.g. ray (evret-ray)")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE",
                   help="executor option (repeatable), e.g. address=auto for ray")
    from evret_core.cli._tracking import add_tracking_arguments

    add_tracking_arguments(p)  # after QRELS RUN: `evret trec QRELS RUN --mlflow DIR` (or --mlflow=DIR anywhere)
    p.set_defaults(func=run)


def _format(family: str, value: float) -> str:
    return f"{value:.0f}" if family in COUNT_FAMILIES else f"{value:.4f}"


def _scores(args: argparse.Namespace, metrics: list[Any]) -> tuple[str, dict[str, dict[str, float]]]:
    """The run tag and every scored query's values (``{qid: {metric: value}}``)."""
    if args.shards is not None or args.executor is not None or args.executor_option:
        from evret_core.contracts.errors import EvretError
        from evret_core.evaluation.executors import resolve_executor
        from evret_core.io.options import parse_options
        from evret_core.metrics.shards import MAX_SHARDS, evaluate_run_file

        if args.shards is not None and not 1 <= args.shards <= MAX_SHARDS:
            raise EvretError(f"--shards must be between 1 and {MAX_SHARDS:,}, got {args.shards}")
        executor = resolve_executor(args.executor, parse_options(args.executor_option, "--executor-option"))
        try:
            scored = evaluate_run_file(args.qrels, args.run, metrics, shards=args.shards, executor=executor,
                                       relevance_level=args.relevance_level, complete=args.complete)
        finally:
            shutdown = getattr(executor, "shutdown", None)
            if callable(shutdown):
                shutdown()
        return scored.tag, {q: scored.per_query(q) for q in scored.qids}
    from evret_core.contracts.errors import EvretError
    from evret_core.io.runcolumns import read_run_columns
    from evret_core.io.trec import read_qrels
    from evret_core.metrics.engine import evaluate_run
    from evret_core.metrics.shards import no_lines_error

    qrels = read_qrels(args.qrels)
    trec_run = read_run_columns(args.run)  # columns: a query's dict is built only while its chunk is scored
    if not len(trec_run):
        raise EvretError(no_lines_error(args.run))
    if not args.complete and qrels and not any(q in qrels for q in trec_run.qids):
        raise EvretError("no query of the run has relevance judgments (the qrels and the run share no query id); "
                         "--complete scores every judged query, missing ones as 0")
    per_query: dict[str, dict[str, float]] = evaluate_run(
        qrels, trec_run, metrics, per_query=True,
        relevance_level=args.relevance_level, complete=args.complete,
    )
    return trec_run.tag, per_query


def run(args: argparse.Namespace) -> int:
    from evret_core.cli._tracking import check_tracking_arguments, log_run
    from evret_core.limits import check_float
    from evret_core.metrics.engine import resolve_metrics

    if args.relevance_level is not None:
        check_float(args.relevance_level, "--relevance-level", -1e9, 1e9)
    metrics = resolve_metrics(args.metric or DEFAULT_METRICS)
    tracking = check_tracking_arguments(args, [args.qrels, args.run])
    from evret_core.contracts.errors import EvretError
    from evret_core.metrics.ir import UNJUDGED_WARNING_K, Unjudged, unjudged_warning

    probe = Unjudged(UNJUDGED_WARNING_K)  # for the warning; printed only when asked for
    asked = any(m.name == probe.name for m in metrics)
    try:
        tag, per_query = _scores(args, metrics if asked else [*metrics, probe])
    except EvretError as exc:
        if _swapped(args.qrels, args.run):
            raise EvretError(f"{exc}; {args.qrels} looks like a run file and {args.run} like qrels: the files may "
                             f"be swapped (evret trec QRELS RUN)") from None
        raise
    qids = sorted(per_query)
    if qids:
        warning = unjudged_warning(sum(per_query[q][probe.name] for q in qids) / len(qids), len(qids),
                                   lambda: _grades(args.qrels))
        if warning:
            print(warning, file=sys.stderr)
    if not asked:
        for row in per_query.values():
            row.pop(probe.name, None)
    aggregate: dict[str, float] = {}
    for m in metrics:
        values = [per_query[q][m.name] for q in qids]
        total = float(sum(values))
        aggregate[m.name] = total if m.family in COUNT_FAMILIES else total / len(values)
    if args.json:
        out: dict[str, Any] = {"run": tag, "num_q": len(qids), "all": aggregate}
        if args.per_query:
            out["per_query"] = {q: per_query[q] for q in qids}
        print(json.dumps(out, indent=2))
        log_run(args, tracking, _tracked(args, metrics, tag, aggregate, per_query))
        return 0
    width = max(22, *(len(m.name) + 1 for m in metrics))
    lines: list[str] = []
    if args.per_query:
        for q in qids:
            lines += [f"{m.name:<{width}}\t{q}\t{_format(m.family, per_query[q][m.name])}" for m in metrics]
    lines.append(f"{'runid':<{width}}\tall\t{tag}")
    lines.append(f"{'num_q':<{width}}\tall\t{len(qids)}")
    lines += [f"{m.name:<{width}}\tall\t{_format(m.family, aggregate[m.name])}" for m in metrics]
    print("\n".join(lines))
    log_run(args, tracking, _tracked(args, metrics, tag, aggregate, per_query))
    return 0


def _grades(path: str) -> list[float]:
    """Every grade of the qrels file (read again only when the run looks mostly unjudged)."""
    from evret_core.io.trec import read_qrels

    return [g for judged in read_qrels(path).values() for g in judged.values()]


def _swapped(qrels: str, run: str) -> bool:
    """Whether the first file's first line has a run line's 6 fields and the second's a qrels line's 4."""
    return _first_fields(qrels) == 6 and _first_fields(run) == 4


def _first_fields(path: str) -> int | None:
    """How many fields the first line that is not blank nor a comment has, from the first 64 KiB of ``path``."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return None
    for line in head.decode("utf-8", "replace").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return len(line.split())
    return None


def _tracked(args: argparse.Namespace, metrics: list[Any], tag: str, aggregate: dict[str, float],
             per_query: dict[str, dict[str, float]]) -> Any:
    """What ``--mlflow`` logs of a scored run file: the options, the `all` values (no intervals: trec_eval has
    none) and, as ``results.json``, the ``--json --per-query`` document."""
    import platform
    from pathlib import Path

    from evret_core.report.tracking import TrackedRun
    from evret_core.version import __version__

    params = {"qrels": args.qrels, "run": args.run, "metrics": [m.name for m in metrics], "complete": args.complete,
              "relevance_level": args.relevance_level, "shards": args.shards, "executor": args.executor}
    document = {"run": tag, "num_q": len(per_query), "all": aggregate, "per_query": dict(sorted(per_query.items()))}

    def write(path: Path) -> None:
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")

    manifest = {"evret_version": __version__, "run_tag": tag, "num_q": len(per_query),
                "python": platform.python_version(), "platform": platform.platform(terse=True)}
    return TrackedRun("trec", params, aggregate, {}, manifest, {"results.json": write})
