"""``evret judge``: grade the pooled top documents of one or more runs with a judge that needs no expected answer,
and write the grades as TREC qrels (a judged pool).

The pool is :func:`evret_core.judge.pooling.pool_runs` (best rank first, so a run stopped half way has judged
shallow pools of every query); each pair is judged on ``(query, passage text)``
(:func:`~evret_core.contracts.judge.reference_free_context`) through the judge's own cache, so a rerun sends
nothing already answered, in the executor's ``grade`` stage (``--executor ray`` spreads it over Ray workers).
Pairs whose grade could not be made are left out of the qrels and counted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError, visible
from evret_core.limits import MAX_DEPTH, check_int

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "judge", help="grade the pooled top-k of runs with a reference-free judge; write TREC qrels",
        description="Pool the top --depth documents of each query over the runs, grade each (query, passage) pair "
                    "with a judge that needs no expected answer (e.g. relevance), and write the grades as TREC "
                    "qrels. Pairs are judged best rank first; --skip-judged leaves out pairs an existing qrels "
                    "file already judges.")
    p.add_argument("--queries", required=True, metavar="FILE",
                   help="the queries: a TREC topics TSV (query_id<TAB>text) or any dataset file evret evaluate reads")
    p.add_argument("--corpus", required=True, metavar="CORPUS.jsonl", help="the passages' texts (Evret's corpus JSONL)")
    p.add_argument("--run", action="append", required=True, metavar="RUN",
                   help="a TREC run file or an evret results file (repeatable)")
    p.add_argument("--depth", type=int, default=10, help="pool each run's top N documents per query (default 10)")
    p.add_argument("--judge", default="relevance", help="a judge that needs no expected answer (default: relevance)")
    p.add_argument("--judge-option", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--skip-judged", metavar="QRELS", help="leave out the pairs this qrels file already judges")
    p.add_argument("--judge-batch-size", type=int, default=1024, help="contexts per batch_grade call (default 1024)")
    p.add_argument("--executor", help="where the grading runs: local (default) or a plugin's executor, e.g. ray "
                                      "(evret-ray)")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE",
                   help="executor option (repeatable), e.g. address=auto or max_in_flight=40 for ray")
    p.add_argument("-o", "--output", metavar="QRELS", help="write the judged pool here as TREC qrels ('-': stdout)")
    p.add_argument("--dry-run", action="store_true",
                   help="pool and plan: print what the judge would send (after dedupe and cache), without judging")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--no-progress", action="store_true", help="never show progress")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the judge, its builder and the plugin registry, and numpy (trec): loaded when the command runs, not by
    # `evret --help`
    from evret_core.cli.evaluate import _print_plan
    from evret_core.contracts import kinds
    from evret_core.contracts.judge import reference_free_context
    from evret_core.contracts.values import grade_key
    from evret_core.evaluation.executors import resolve_executor
    from evret_core.io import trec
    from evret_core.io.options import parse_options
    from evret_core.io.outputs import check_outputs
    from evret_core.judge.pooling import pool_runs
    from evret_core.plugins import builder

    depth = check_int(args.depth, "--depth", 1, MAX_DEPTH)
    batch_size = check_int(args.judge_batch_size, "--judge-batch-size", 1, 1_000_000)
    if not args.dry_run and not args.output:
        raise EvretError("--output QRELS is needed (or --dry-run to plan without judging)")
    if args.output == "-" and args.json:
        raise EvretError("--output - and --json would both write to standard output: give --output a file")
    options = parse_options(args.judge_option, "--judge-option")
    inputs = [args.queries, args.corpus, *args.run, *([args.skip_judged] if args.skip_judged else [])]
    check_outputs({"--output": None if args.dry_run else args.output}, inputs=inputs, options=options.values())
    judge = builder.build(kinds.JUDGE, args.judge, options, sources=dict.fromkeys(options, "--judge-option"))
    name = getattr(judge, "name", args.judge)
    if not getattr(judge, "reference_free", False):
        raise EvretError(f"--judge {args.judge}: judge {name!r} needs expected answers; evret judge grades "
                         f"(query, passage) pairs alone: give a reference-free judge such as relevance")
    executor = resolve_executor(args.executor, parse_options(args.executor_option, "--executor-option"))
    topics = _queries(args.queries, trec)
    runs = [_rankings(path, trec) for path in args.run]
    judged = trec.read_qrels(args.skip_judged) if args.skip_judged else None
    pool = pool_runs(list(topics), runs, depth, judged)
    spaced = next(((q, d) for q, d in pool.pairs if any(c.isspace() for c in q + d)), None)
    if spaced is not None:  # found now, not when the qrels are written after the judging was paid for
        raise EvretError(f"query {visible(spaced[0])!r}, document {visible(spaced[1])!r}: a TREC qrels id cannot "
                         f"hold whitespace; give the queries and documents ids without it")
    texts = _texts(args.corpus, {doc for _, doc in pool.pairs})  # every text found before any judging
    contexts = [reference_free_context(topics[qid], texts[doc]) for qid, doc in pool.pairs]
    distinct = list(dict.fromkeys(contexts))  # a (query, text) pair is judged once
    if args.dry_run:
        plan = getattr(judge, "plan", None)
        shown = dict(plan(distinct)) if callable(plan) else {"contexts": len(distinct), "unique": len(distinct)}
        shown.update(pairs=len(pool.pairs), skipped=pool.skipped)
        if args.json:
            print(json.dumps(shown, indent=2, sort_keys=True, allow_nan=False))
        else:
            print(f"pool: {len(pool.pairs)} (query, passage) pairs over {len(topics)} queries, depth {depth}"
                  + (f", {pool.skipped} already judged" if pool.skipped else ""))
            _print_plan(shown)
        return 0
    grades, judge_stats = _grade(executor, judge, distinct, batch_size, args.no_progress)
    grade_of = dict(zip(distinct, grades, strict=True))
    qrels: dict[str, dict[str, float]] = {}
    unmeasured = 0
    histogram: dict[float, int] = {}
    for (qid, doc), context in zip(pool.pairs, contexts, strict=True):
        grade = grade_of[context]
        if grade is None:
            unmeasured += 1
            continue
        qrels.setdefault(qid, {})[doc] = grade
        histogram[grade] = histogram.get(grade, 0) + 1
    trec.write_qrels(args.output, {qid: qrels[qid] for qid in sorted(qrels)}, "--output")
    summary = {
        "judge": name, "grades": getattr(judge, "grades", None), "depth": depth, "runs": len(runs),
        "queries": len(topics), "pools": pool.per_query, "pairs": len(pool.pairs), "distinct": len(distinct),
        "skipped": pool.skipped, "judged": len(pool.pairs) - unmeasured, "unmeasured": unmeasured,
        "histogram": {grade_key(g): histogram[g] for g in sorted(histogram)}, "extra_run_queries": len(pool.extra_queries),
        "cost": _cost(judge_stats), "output": args.output,
    }
    out = sys.stderr if args.output == "-" else sys.stdout
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True, allow_nan=False), file=out)
    else:
        _print_summary(summary, out)
    return 0


def _cost(stats: Any) -> dict[str, dict[str, Any]]:
    """An LLM judge's cost per provider from its ``stats()`` (``{}`` for a judge that keeps none)."""
    cost = stats.get("cost") if isinstance(stats, dict) else None
    return {str(k): v for k, v in cost.items() if isinstance(v, dict)} if isinstance(cost, dict) else {}


def _queries(path: str, trec: Any) -> dict[str, str]:
    """query id -> text, from a topics TSV or a dataset file (any format evret evaluate reads)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".tsv", ".txt", ".topics", "") and not Path(path).is_dir():  # a folder: a BEIR dataset
        return trec.read_topics(path)  # type: ignore[no-any-return]
    from evret_core.io.datasets import EvaluationDataset

    return {q.query_id: q.query_text for q in EvaluationDataset.load(path).queries}


def _rankings(path: str, trec: Any) -> dict[str, list[str]]:
    """query id -> ranked doc ids, from a TREC run file or an evret results file (starts with ``{``)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64).lstrip()
    except FileNotFoundError:
        raise EvretError(f"--run {path}: no such file") from None
    except OSError as exc:
        raise EvretError(f"--run {path}: cannot be read ({exc.strerror})") from None
    if head.startswith(b"{"):
        from evret_core.results.files import load_results

        results = load_results(path, kind="retrieval")
        return {qid: list(q.retrieved_ids) for qid, q in results.per_query.items()}  # type: ignore[attr-defined]
    return {qid: trec.ranked_docs(scores) for qid, scores in trec.read_run(path).items()}


def _texts(path: str, wanted: set[str]) -> dict[str, str]:
    """The texts of the ``wanted`` documents (each record's ``text``, the text ``evret evaluate --run --corpus``
    judges, so the two share the judge's cache); a pooled document the corpus lacks is an error naming it, before
    any judging."""
    from evret_core.io.corpus import iter_corpus

    texts: dict[str, str] = {}
    for _where, doc_id, record in iter_corpus(path):
        if doc_id in wanted:
            texts[doc_id] = record["text"]
    lacking = sorted(wanted - texts.keys())
    if lacking:
        shown = ", ".join(visible(d) for d in lacking[:5]) + (" ..." if len(lacking) > 5 else "")
        raise EvretError(f"--corpus {path}: {len(lacking)} pooled document(s) are not in the corpus: {shown}")
    return texts


def _grade(executor: Any, judge: Any, contexts: list[Any], batch_size: int,
           quiet: bool) -> tuple[list[float | None], Any]:
    """The judge's grade of each context through the executor's ``grade`` stage (the judge's own cache); an
    executor that keeps workers (``ray``) is shut down after."""
    from evret_core.contracts.judge import judge_progress
    from evret_core.plugins.loading import plugin_exits_as_errors
    from evret_core.progress import after_a_while, report_progress, terminal_progress

    if not contexts:
        return [], None
    bar = None if quiet else terminal_progress()
    progress = None if bar is None else after_a_while(bar)
    report_progress(progress, "judge", 0, len(contexts))
    try:
        with judge_progress(progress), plugin_exits_as_errors():
            run = executor.grade(judge, contexts, batch_size,
                                 lambda done: report_progress(progress, "judge", done, len(contexts)))
    finally:
        if bar is not None:
            bar.close()
        shutdown = getattr(executor, "shutdown", None)
        if callable(shutdown):
            shutdown()
    if run.grades is None or len(run.grades) != len(contexts):
        got = "no" if run.grades is None else len(run.grades)
        raise EvretError(f"executor {executor.name!r} returned {got} grades for {len(contexts)} contexts")
    return list(run.grades), run.stats


def _print_summary(summary: dict[str, Any], out: Any) -> None:
    sizes = list(summary["pools"].values())
    histogram = ", ".join(f"{grade}: {count}" for grade, count in summary["histogram"].items())
    scale = f"0-{summary['grades']}" if summary.get("grades") else "0-1"
    print(f"judged by {visible(str(summary['judge']))!r}: {summary['pairs']} (query, passage) pairs from "
          f"{summary['runs']} run(s) at depth {summary['depth']} over {summary['queries']} queries (pool per query: "
          f"{min(sizes, default=0)}-{max(sizes, default=0)}), {summary['distinct']} distinct", file=out)
    if summary["skipped"]:
        print(f"{summary['skipped']} pair(s) already judged in --skip-judged, left out", file=out)
    print(f"grades {scale}: {histogram or 'none'}; {summary['unmeasured']} unmeasured (left out of the qrels)",
          file=out)
    for provider, cost in summary["cost"].items():
        print(f"{provider} ({cost.get('model')}): {cost.get('calls', 0)} call(s) sent, {cost.get('cache_hits', 0)} "
              f"cache hit(s)", file=out)
    if summary["extra_run_queries"]:
        print(f"{summary['extra_run_queries']} run queries are not among --queries: ignored", file=out)
    if summary["output"] != "-":
        print(f"qrels written to {summary['output']}", file=out)
