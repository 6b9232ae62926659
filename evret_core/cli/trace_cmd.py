"""``evret trace``: per-hop retrieval metrics and outcomes of agent runs, from Evret's trace JSONL or an OpenInference
(Phoenix) span export."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from evret_core.contracts.errors import EvretError
from evret_core.limits import MAX_DEPTH, MAX_RESAMPLES, MAX_SEED, check_int

if TYPE_CHECKING:
    from evret_core.io.traces import TraceRecord

TRACE_FORMATS = ("evret", "openinference")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("trace", help="score every retrieval hop of agent traces and say which hop lost the gold")
    p.add_argument("--traces", required=True, metavar="FILE",
                   help="Evret trace JSONL, or an OpenInference span export with --trace-format openinference")
    p.add_argument("--trace-format", choices=TRACE_FORMATS, default="evret",
                   help="evret (the trace JSONL, default) or openinference (Phoenix spans: a JSON list, a REST page "
                        "{\"data\": [...]}, JSON Lines, or OTLP JSON)")
    p.add_argument("--labels", metavar="LABELS.jsonl",
                   help="labels by trace_id or question: expected_answers, relevant_doc_ids, hops: [{...}] by position")
    p.add_argument("--corpus", metavar="CORPUS.jsonl", help="texts of retrieved documents the traces give by id only")
    p.add_argument("--judge", help="the Evret judge of hops labelled by expected answers (default contains)")
    p.add_argument("--judge-option", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--answer-judge", metavar="NAME",
                   help="an Evret judge that decides whether the final answer states each expected answer (default: "
                        "the RAG harness's correctness rule)")
    p.add_argument("--metric", action="append", metavar="METRIC",
                   help="metric per hop (repeatable; default recall@5, ndcg@5, hit_rate@5)")
    p.add_argument("-k", "--k", type=int, default=None,
                   help="a hop found the gold when a relevant document is in its top k (default: the largest metric "
                        "cutoff, 5)")
    p.add_argument("--output", metavar="FILE", help="write the trace results JSON here")
    p.add_argument("--write-traces", metavar="TRACES.jsonl",
                   help="write the traces read (labels applied) as Evret trace JSONL, e.g. to label them by hand")
    p.add_argument("--executor", help="where judging runs: local (default) or a plugin's executor, e.g. ray")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE", help="executor option (repeatable)")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (default 0)")
    p.add_argument("--resamples", dest="n_resamples", type=int, default=1000,
                   help="bootstrap resamples (default 1000)")
    p.add_argument("--dry-run", action="store_true",
                   help="read and plan: print the traces, hops and judgments to make, and judge nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from evret_core.progress import with_terminal_progress

    return with_terminal_progress(lambda: _run(args))


def _metrics_and_k(args: argparse.Namespace) -> tuple[list[str], int]:
    from evret_core.io.traces import DEFAULT_METRICS
    from evret_core.plugins.registry import create_metric

    metrics = list(args.metric or DEFAULT_METRICS)
    depths = [m.depth for m in map(create_metric, metrics) if m.depth is not None]
    k = args.k if args.k is not None else (max(depths) if depths else 5)
    check_int(k, "-k", 1, MAX_DEPTH)
    deeper = [name for name, d in zip(metrics, (create_metric(m).depth for m in metrics), strict=True)
              if d is not None and d > k]
    if deeper:
        raise EvretError(f"-k {k}: metric {', '.join(deeper)} reads deeper; raise -k or lower the cutoff")
    return metrics, k


def _run(args: argparse.Namespace) -> int:
    # the readers, the judge's builder and the evaluator: loaded when the command runs, not by `evret --help`
    from evret_core.contracts.kinds import JUDGE
    from evret_core.io.options import parse_options
    from evret_core.io.outputs import check_outputs
    from evret_core.io.traces import write_traces

    check_int(args.seed, "--seed", 0, MAX_SEED)
    check_int(args.n_resamples, "--resamples", 1, MAX_RESAMPLES)
    check_outputs({"--output": args.output, "--write-traces": args.write_traces},
                  inputs=[args.traces, args.labels, args.corpus])
    metrics, k = _metrics_and_k(args)
    judge_options = parse_options(args.judge_option, "--judge-option")
    executor_options = parse_options(args.executor_option, "--executor-option")
    if judge_options and not args.judge:
        raise EvretError("--judge-option needs --judge (the judge it is an option of)")
    traces = _read(args)
    if args.write_traces:
        write_traces(args.write_traces, traces)
        print(f"{len(traces)} traces written to {args.write_traces}", file=sys.stderr)
    from evret_core.plugins import builder
    from evret_core.traces.hops import plan_hops

    plan = plan_hops(traces)  # a hop without texts is refused here, before any judge is built
    judge: Any = None
    if args.judge:
        judge = builder.build(JUDGE, args.judge, judge_options, sources=dict.fromkeys(judge_options, "--judge-option"))
    answer_judge = builder.build(JUDGE, args.answer_judge, {}) if args.answer_judge else None
    hops = sum(h.kind == "retrieve" for t in traces for h in t.hops)
    if args.dry_run:
        by_text = sum(q.relevant_doc_ids is None for q in plan.dataset.queries)
        contexts = sum(len(plan.run[q.query_id]) * len(q.expected_answers) for q in plan.dataset.queries
                       if q.relevant_doc_ids is None)
        print(f"{len(traces)} traces, {hops} retrieve hops, {len(plan.dataset.queries)} labelled "
              f"({len(plan.dataset.queries) - by_text} by ids, {by_text} by expected answers: up to {contexts} "
              f"judgments); nothing judged (--dry-run)")
        return 0
    from evret_core.traces.outcomes import evaluate_traces

    config = {"traces": args.traces, "trace_format": args.trace_format, "labels": args.labels, "corpus": args.corpus,
              "judge": judge.config() if judge is not None and callable(getattr(judge, "config", None))
              else args.judge or "contains",
              "answer_judge": args.answer_judge, "k": k, "seed": args.seed, "n_resamples": args.n_resamples,
              "executor": args.executor or "local"}
    results = evaluate_traces(traces, metrics, k, judge=judge, answer_judge=answer_judge, executor=args.executor,
                              executor_options=executor_options or None, seed=args.seed,
                              n_resamples=args.n_resamples, config=config)
    if args.output:
        results.write(args.output)  # before printing: a closed pipe loses no paid work
    from evret_core.report.trace_tables import render_terminal

    print(f"{len(traces)} traces, {hops} retrieve hops, {len(results.queries)} measured")
    print()
    print(render_terminal(results), end="")
    if args.output:
        print(f"trace results written to {args.output}", file=sys.stderr)
    return 0


def _read(args: argparse.Namespace) -> list[TraceRecord]:
    """The traces of ``--traces`` (by ``--trace-format``), with ``--labels`` applied and ``--corpus`` texts filled."""
    from evret_core.io.corpus import read_corpus
    from evret_core.io.openinference import read_openinference
    from evret_core.io.traces import apply_labels, fill_texts, read_labels, read_traces

    if args.trace_format == "openinference":
        traces = read_openinference(args.traces)
    else:
        traces = read_traces(args.traces)
    if args.labels:
        traces = apply_labels(traces, read_labels(args.labels))
    if args.corpus:
        traces = fill_texts(traces, read_corpus(args.corpus), args.corpus)
    return traces
