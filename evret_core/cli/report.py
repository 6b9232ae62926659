"""``evret report``: a Markdown, HTML or LaTeX report of one or more results files."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from evret_core.contracts.errors import EvretError, visible
from evret_core.limits import MAX_DEPTH, check_float, check_int

if TYPE_CHECKING:
    from evret_core.results.rag_results import RagResults


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help="write a Markdown, HTML or LaTeX report (or a CSV table) of results files")
    p.add_argument("results", nargs="+", metavar="RESULTS.json", help="one or more results files")
    p.add_argument("--format", choices=["markdown", "html", "latex", "csv"], default="markdown",
                   help="report format (default: markdown); csv: one row per query (or judgment) of every run")
    p.add_argument("--level", choices=["query", "judgment"], default="query",
                   help="with --format csv: a row per query (default) or per judged document")
    p.add_argument("--output", metavar="FILE", help="write the report here (default: standard output)")
    p.add_argument("--test", choices=["t", "randomization", "bootstrap"], default="t",
                   help="paired test of the comparison section (several runs)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after correction")
    p.add_argument("--max-k", type=int, default=None, help="largest k of the metric@k curves (default: depth)")
    p.add_argument("--dataset", metavar="QUESTIONS",
                   help="RAG runs, --format html: the question set the runs used, so the drill-down shows each "
                        "context's text (.jsonl with --corpus, or SQuAD-format .json)")
    p.add_argument("--corpus", metavar="CORPUS", help="with --dataset: the corpus .jsonl its gold ids point into")
    p.add_argument("--dataset-format", choices=["rgb"], help="with --dataset: read it as this format (rgb)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from evret_core.progress import with_terminal_progress

    return with_terminal_progress(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    from evret_core.io.outputs import check_outputs, write_output
    from evret_core.report.api import make_report, report_data

    if args.max_k is not None:
        check_int(args.max_k, "--max-k", 1, MAX_DEPTH)
    check_float(args.alpha, "--alpha", 0.0, 1.0, open_interval=True)
    # the drill-down's question set and corpus (an RGB file too) are inputs like the results files
    check_outputs({"--output": args.output}, inputs=[*args.results, args.dataset, args.corpus])
    from evret_core.report.api import any_runs, rag_runs
    from evret_core.results.evaluation import EvaluationResults

    loaded = any_runs(tuple(args.results))  # retrieval or RAG runs, not mixed; redacted before they are shown
    rag = rag_runs(loaded)
    if rag is not None:
        return _report_rag(args, rag)
    traces = {n: r for n, r in loaded.items() if r.KIND == "trace"}
    if traces:
        return _report_traces(args, traces)
    from evret_core.results.conversation_results import ConversationResults

    conversation = [r for r in loaded.values() if isinstance(r, ConversationResults)]
    if conversation:
        return _report_conversation(args, conversation)
    runs = {n: r for n, r in loaded.items() if isinstance(r, EvaluationResults)}
    if args.dataset or args.corpus or args.dataset_format:
        raise EvretError("--dataset, --corpus and --dataset-format are for RAG results files (the drill-down's "
                         "context texts); retrieval results hold their texts already")
    if args.format == "csv":
        from evret_core.results.frames import runs_to_csv

        write_output(args.output or "-", runs_to_csv(runs, args.level),
                     option="--output")
        if args.output and args.output != "-":
            print(f"csv table written to {args.output}", file=sys.stderr)
        return 0
    data = report_data(runs, test=args.test, alpha=args.alpha, max_k=args.max_k)
    text = make_report(data, format=args.format)
    for warning in [*(data.comparison.warnings if data.comparison is not None else []), *data.warnings]:
        print(f"WARNING: {visible(warning)}", file=sys.stderr)
    write_output(args.output or "-", text, option="--output")
    if args.output and args.output != "-":
        print(f"{args.format} report written to {args.output}", file=sys.stderr)
    return 0


def _report_conversation(args: argparse.Namespace, runs: list[Any]) -> int:
    """One conversation run: a Markdown or HTML report (two runs are compared with evret compare)."""
    from evret_core.io.outputs import write_output
    from evret_core.report.conversation_document import CONVERSATION_FORMATS, render_conversation

    if len(runs) > 1:
        raise EvretError("evret report takes one conversation results file; compare runs with evret compare")
    fmt = args.format
    if fmt not in CONVERSATION_FORMATS:
        raise EvretError(f"--format {fmt}: conversation runs are reported as markdown or html (the results JSON "
                         f"holds everything else)")
    if args.dataset or args.corpus or args.dataset_format:
        raise EvretError("--dataset, --corpus and --dataset-format are for RAG results files; conversation "
                         "results hold their turns' texts already")
    write_output(args.output or "-", render_conversation(runs[0], fmt), option="--output")
    if args.output and args.output != "-":
        print(f"{fmt} report written to {args.output}", file=sys.stderr)
    return 0


def _report_rag(args: argparse.Namespace, runs: dict[str, RagResults]) -> int:
    """RAG runs: a Markdown or HTML report (with the comparison of the runs when there are several)."""
    from evret_core.io.outputs import write_output
    from evret_core.report import RAG_FORMATS, RagReportData, render_report
    from evret_core.report.rag_compare import compare_rag

    if args.format not in RAG_FORMATS:
        raise EvretError(f"--format {args.format}: RAG runs are reported as markdown or html (the results JSON "
                         f"holds everything else)")
    if (args.corpus or args.dataset_format) and not args.dataset:
        raise EvretError("--corpus and --dataset-format go with --dataset (the question set the runs used)")
    if args.dataset and args.format != "html":
        raise EvretError("--dataset: context texts are shown by the HTML report's drill-down; add --format html")
    questions = None
    unchecked: list[str] = []
    if args.dataset:
        from evret_core.rag.rag_config import load_questions
        from evret_core.report.rag_compare import check_questions

        questions = load_questions(args.dataset, args.corpus, args.dataset_format)
        # the files must be those the run read: an edited passage must not show as the context the run saw
        unchecked = check_questions(runs, questions, f"--dataset {args.dataset}",
                                    f"--corpus {args.corpus}" if args.corpus else None)
    comparison = compare_rag(runs, test=args.test, alpha=args.alpha) if len(runs) > 1 else None
    data = RagReportData(runs, comparison, questions)
    text = render_report(data, args.format) + ("\n" if args.format == "markdown" else "")
    for warning in [*unchecked, *data.warnings]:
        print(f"WARNING: {visible(warning)}", file=sys.stderr)
    write_output(args.output or "-", text, option="--output")
    if args.output and args.output != "-":
        print(f"{args.format} report written to {args.output}", file=sys.stderr)
    return 0


def _report_traces(args: argparse.Namespace, runs: dict[str, Any]) -> int:
    """Agent-trace runs (``evret trace``, ``runs``: name -> TraceResults): a Markdown or HTML report of each run's
    tables and traces."""
    from evret_core.io.outputs import write_output
    from evret_core.report.render import render_report
    from evret_core.report.trace_tables import TraceReportData

    if args.format not in ("markdown", "html"):
        raise EvretError(f"--format {args.format}: trace runs are reported as markdown or html (the results JSON "
                         f"holds everything else)")
    if args.dataset or args.corpus or args.dataset_format:
        raise EvretError("--dataset, --corpus and --dataset-format are for RAG results files; trace results hold "
                         "their texts already")
    data = TraceReportData(runs)
    text = render_report(data, args.format)
    for warning in data.warnings:
        print(f"WARNING: {visible(warning)}", file=sys.stderr)
    write_output(args.output or "-", text, option="--output")
    if args.output and args.output != "-":
        print(f"{args.format} report written to {args.output}", file=sys.stderr)
    return 0
