"""``evret evaluate``: run a retriever over a dataset, judge, and print the metrics."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evret_core.cli._conversation import add_history_window_arguments
from evret_core.cli._failures import EndOfRun, add_end_of_run_arguments, check_unmeasured_flags
from evret_core.cli._tracking import add_tracking_arguments, check_tracking_arguments, log_run, note_dry_run
from evret_core.cli.gating import add_gate_arguments, check_gate_arguments, run_gates
from evret_core.contracts.errors import EvretError, visible

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evaluate", help="evaluate a retriever on a dataset")
    p.add_argument("--dataset", help="dataset file (.jsonl, .json, .csv) or BEIR folder")
    p.add_argument("--retriever", help="registered retriever name, e.g. bm25")
    p.add_argument("--retriever-option", action="append", metavar="KEY=VALUE", help="retriever option (repeatable)")
    p.add_argument("--run", metavar="FILE",
                   help="evaluate retrieved results from a file instead of a retriever: a retrieved-results .jsonl, "
                        "a TREC run file or a .json run (the built-in retriever 'run')")
    p.add_argument("--corpus", metavar="CORPUS.jsonl",
                   help="with --run: the texts of a TREC run's documents; with a conversation dataset: its corpus")
    p.add_argument("--judge", help="registered judge name (default: contains)")
    p.add_argument("--judge-option", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--executor", help="where retrieval, judging and metrics run: local (default) or a plugin's "
                                      "executor, e.g. ray (evret-ray)")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE",
                   help="executor option (repeatable), e.g. address=auto for ray")
    p.add_argument("--metric", action="append", metavar="NAME@K", help="metric, e.g. ndcg@10 (repeatable)")
    p.add_argument("--matching", choices=["first_match", "any_match"], help="how judgments become ids")
    p.add_argument("-k", "--k", type=int, help="documents to retrieve (default: the largest metric cutoff, 100 when no metric has "
                                             "one); a metric without a cutoff reads this many")
    p.add_argument("-l", "--relevance-level", type=float, metavar="N",
                   help="binary measures count a grade >= N as relevant (as evret trec -l; default: grade > 0, or the "
                        "judge's cut when a graded judge such as relevance grades queries without labels)")
    p.add_argument("--missing-queries", choices=["error", "zero"],
                   help="a precomputed run lacking some queries: fail (default) or score them 0 and report them")
    p.add_argument("--output", help="write the results JSON here (only when the run succeeds)")
    p.add_argument("--config", help="TOML file with the same settings; command-line options win")
    p.add_argument("--pipeline", metavar="PIPELINE.toml",
                   help="evaluate a pipeline of stages (retrievers -> fusion -> reranker -> packing) in one run: a "
                        "TOML file of [[stages]] (instead of --retriever; a [pipeline] table in --config does the same)")
    p.add_argument("--report", metavar="FILE.md|FILE.html",
                   help="with a pipeline: also write its report, Markdown or HTML by the suffix")
    p.add_argument("--fail-on-unmeasured", action="store_true", default=None,
                   help="fail when any judgment could not be made instead of reporting it (by default only a run "
                        "in which every judgment failed exits non-zero)")
    add_end_of_run_arguments(p)
    p.add_argument("--confidence-level", type=float, help="level of the bootstrap intervals (default 0.95)")
    p.add_argument("--resamples", dest="n_resamples", type=int, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, help="seed of the bootstrap (default 0)")
    p.add_argument("--min-slice-size", type=int, help="flag slices with fewer queries than this (default 10)")
    p.add_argument("--no-progress", action="store_true", help="never show progress")
    add_gate_arguments(p)
    add_tracking_arguments(p)
    p.add_argument("--dry-run", action="store_true",
                   help="retrieve and plan: print how many judgments would be sent (after dedupe and cache) and "
                        "a token estimate, without judging or calling any LLM")
    _add_conversation_arguments(p)
    p.set_defaults(func=run)


CONVERSATION_ONLY = ("dataset_format", "qrels", "forms", "baseline_form", "history_turns", "history_roles",
                     "history_max_words", "rewriter", "rewriter_option", "unit", "test", "all_pairs")
"""The flags that apply to conversation datasets only."""


def _add_conversation_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("conversation datasets (docs/conversation-evaluation.md)")
    g.add_argument("--dataset-format", choices=["conversations", "mtrag"],
                   help="read --dataset as conversations (a .jsonl whose records have 'turns' is recognised "
                        "without it) or as MTRAG files")
    g.add_argument("--qrels", metavar="FILE", help="the turns' relevance judgments (BEIR TSV or TREC qrels, "
                                                   "keyed by turn_id)")
    g.add_argument("--forms", metavar="FORM,FORM",
                   help="query forms to retrieve each turn with: last_turn, full_history, rewrite, rewriter "
                        "(default: all of them; rewriter with --rewriter)")
    g.add_argument("--baseline-form", help="the form the others are compared with (default last_turn)")
    add_history_window_arguments(g, "registered rewriter for the rewriter form, e.g. carry-terms or llm")
    g.add_argument("--unit", choices=["conversation", "turn"],
                   help="what intervals and tests resample: whole conversations (default) or turns")
    g.add_argument("--test", choices=["randomization", "t", "bootstrap"],
                   help="paired test of the differences between forms (default randomization)")
    g.add_argument("--all-pairs", action="store_true", default=None,
                   help="compare every pair of forms, not only each form with the baseline")


def run(args: argparse.Namespace) -> int:
    from evret_core.cli._pipeline import run_pipeline, uses_pipeline
    from evret_core.evaluation.config import EvaluateConfig
    from evret_core.progress import after_a_while, progress_scope, terminal_progress
    from evret_core.report.terminal import print_scores

    if uses_pipeline(args):
        return run_pipeline(args)
    if args.report:
        raise EvretError("--report goes with a pipeline (--pipeline, or a [pipeline] table in --config); for one "
                         "run's report use evret report RESULTS.json")
    if _conversation_run(args):
        return _run_conversations(args)
    config = EvaluateConfig.from_args(args)  # the --config file, then the flags; errors name the file or flag
    check_unmeasured_flags(args.allow_unmeasured, config.fail_on_unmeasured)
    inputs = [p for p in (args.config, args.run, args.corpus, args.baseline) if p]
    config.check_output(inputs=inputs)  # before any work, not after the spend
    tracking = check_tracking_arguments(args, [*config.input_files(), *inputs])
    floors = check_gate_arguments(args, config.metrics)
    baseline = None
    progress = None if args.no_progress else terminal_progress()
    with progress_scope(after_a_while(progress)):  # reading files that take a while shows progress too
        if args.baseline:  # read before any work: a bad baseline file must not cost a run
            from evret_core.results.files import load_results

            baseline = load_results(args.baseline, kind="retrieval")
        dataset = config.load_dataset()
    for note in dataset.notes:  # what the reader left out of the file (a SQuAD file's unanswerable questions)
        print(f"note: {note}", file=sys.stderr)
    evaluator = config.build_evaluator(dataset, progress)
    evaluator.check_labels(dataset, source=config.dataset)  # queries without labels: refused before retrieving
    if getattr(args, "dry_run", False):
        plan = evaluator.dry_run(dataset)
        if progress is not None:
            progress.close()
        _print_plan(plan)
        note_dry_run(tracking)
        return 0
    import warnings

    from evret_core.evaluation.evaluator import EmptyRetrievalWarning

    with warnings.catch_warnings():  # said after the tables, as an error unless --allow-empty-retrieval
        warnings.simplefilter("ignore", EmptyRetrievalWarning)
        results = evaluator.evaluate(dataset)
    if config.output:  # written first: a closed pipe on standard output must not lose the results
        with progress_scope(after_a_while(progress)):
            results.to_json(config.output)
    if progress is not None:
        progress.close()
    # with --output - the JSON is standard output, so the table goes to standard error
    table = sys.stderr if config.output == "-" else sys.stdout
    print_scores(results, title=f"{dataset.name or 'dataset'}: {len(dataset)} queries", file=table)
    _print_llm_stats(results.stats)
    _print_judged(results.stats.get("judged"))
    missing = results.stats.get("missing_queries")
    if missing:
        shown = visible(", ".join(missing["queries"][:5])) + (" ..." if missing["count"] > 5 else "")
        print(f"WARNING: {missing['count']} queries missing from the run, scored 0: {shown}", file=sys.stderr)
    extra = results.stats.get("extra_run_queries")
    if extra:
        shown = visible(", ".join(extra["queries"][:5])) + (" ..." if extra["count"] > 5 else "")
        print(f"WARNING: {extra['count']} queries of the run are not in the dataset, ignored: {shown}", file=sys.stderr)
    warning = _unjudged(dataset, results)
    if warning:
        print(warning, file=sys.stderr)
    if config.judge is None and any(q.expected_answers for q in dataset.queries):
        _note_default_judge()
    end = EndOfRun(allow_empty=args.allow_empty_retrieval, allow_unmeasured=args.allow_unmeasured)
    empty = results.stats.get("empty_retrieval") or {}
    count, ids = int(empty.get("count") or 0), list(empty.get("queries") or [])
    if count + int((missing or {}).get("count") or 0) == len(dataset):  # a run that holds none of the queries
        count, ids = len(dataset), [q.query_id for q in dataset.queries[:5]]
    end.empty_retrieval(count, len(dataset), ids)
    from evret_core.judge.resolve import DEFAULT_JUDGE

    end.judgments(results.stats, config.judge.name if config.judge is not None else DEFAULT_JUDGE)
    if config.output and config.output != "-":
        print(f"results written to {config.output}", file=sys.stderr)
    log_run(args, tracking, results)  # after the results file: a tracking failure must not lose it
    gates = run_gates(args, floors, results, lambda _path: baseline)
    return end.report() or gates  # last: the line that says why the run failed is the last one


def _conversation_run(args: argparse.Namespace) -> bool:
    """Whether the run is over a conversation dataset; a conversation-only flag on a plain dataset is an error."""
    from evret_core.conversation.turn_config import ConversationConfig, is_conversation_dataset
    from evret_core.io.run_config import load_toml

    dataset, dataset_format = args.dataset, args.dataset_format
    if args.config and (dataset is None or dataset_format is None):
        raw, _ = ConversationConfig.file_settings(load_toml(args.config), args.config)
        dataset = dataset or raw.get("dataset")
        dataset_format = dataset_format or raw.get("dataset_format")
    if is_conversation_dataset(dataset if isinstance(dataset, str) else None,
                               dataset_format if isinstance(dataset_format, str) else None):
        return True
    for name in CONVERSATION_ONLY:
        if getattr(args, name, None) not in (None, False, []):
            flag = "--" + name.replace("_", "-")
            raise EvretError(f"{flag} applies to conversation datasets (a .jsonl of conversations with 'turns', or "
                             f"--dataset-format mtrag)")
    return False


def _run_conversations(args: argparse.Namespace) -> int:
    """``evret evaluate`` over a conversation dataset: every labelled turn under every query form, one run."""
    from evret_core.conversation.turn_config import ConversationConfig
    from evret_core.progress import after_a_while, progress_scope, terminal_progress
    from evret_core.report.conversation_tables import print_conversation_results

    config = ConversationConfig.from_args(args)
    check_unmeasured_flags(args.allow_unmeasured, config.fail_on_unmeasured)
    inputs = [p for p in (args.config, args.baseline) if p]
    config.check_output(inputs=inputs)  # before any work, not after the spend
    tracking = check_tracking_arguments(args, [*config.input_files(), *inputs])
    floors = check_gate_arguments(args, config.score_names())
    baseline = None
    progress = None if args.no_progress else terminal_progress()
    with progress_scope(after_a_while(progress)):
        if args.baseline:  # read before any work: a bad baseline file must not cost a run
            from evret_core.results.files import load_results

            baseline = load_results(args.baseline, kind="conversation")
        dataset = config.load_dataset()
    for note in dataset.notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in dataset.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    evaluator = config.build_conversation_evaluator(dataset, progress)
    if getattr(args, "dry_run", False):
        plan = evaluator.dry_run(dataset)
        if progress is not None:
            progress.close()
        print(f"dry run: {plan['labelled_turns']} labelled turns, {plan['queries']} queries")
        _print_plan(plan["judge"])
        if "rewriter" in plan:
            print(f"rewriter: {json.dumps(plan['rewriter'], sort_keys=True)}")
        note_dry_run(tracking)
        return 0
    import warnings

    from evret_core.evaluation.evaluator import EmptyRetrievalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyRetrievalWarning)
        results = evaluator.evaluate(dataset)
    if config.output:  # written first: a closed pipe on standard output must not lose the results
        results.to_json(config.output)
    if progress is not None:
        progress.close()
    table = sys.stderr if config.output == "-" else sys.stdout
    print_conversation_results(results, title=f"{dataset.name or 'dataset'}: {results.stats['labelled_turns']} "
                                              f"turns in {len(dataset)} conversations", file=table)
    inner = results.stats.get("evaluation") or {}
    _print_llm_stats(inner)
    end = EndOfRun(allow_empty=args.allow_empty_retrieval, allow_unmeasured=args.allow_unmeasured)
    empty = inner.get("empty_retrieval") or {}
    end.empty_retrieval(int(empty.get("count") or 0), int(inner.get("num_queries") or 0),
                        list(empty.get("queries") or []))
    from evret_core.judge.resolve import DEFAULT_JUDGE

    end.judgments(inner, config.judge.name if config.judge is not None else DEFAULT_JUDGE)
    if config.output and config.output != "-":
        print(f"results written to {config.output}", file=sys.stderr)
    log_run(args, tracking, results)
    # gates read the form/metric view of both runs: rewrite/ndcg@10, paired by turn id
    gates = run_gates(args, floors, results.score_view(),
                      lambda _path: None if baseline is None else baseline.score_view())
    return end.report() or gates


def _unjudged(dataset: Any, results: Any) -> str | None:
    """The warning when the id-labelled queries' top 10 is mostly unjudged (mean unjudged@10 > 0.5; see
    :func:`~evret_core.metrics.ir.unjudged_warning`). Text-labelled queries have no holes: every retrieved text is
    judged."""
    from evret_core.metrics.engine import evaluate_rankings
    from evret_core.metrics.ir import UNJUDGED_WARNING_K, unjudged_warning

    qrels = {q.query_id: q.relevance for q in dataset.queries if q.relevant_doc_ids and not q.expected_answers}
    ranked = {qid: list(results.per_query[qid].retrieved_ids) for qid in qrels if qid in results.per_query}
    if not ranked:
        return None
    name = f"unjudged@{UNJUDGED_WARNING_K}"
    mean = evaluate_rankings({q: qrels[q] for q in ranked}, ranked, [name])[name]
    return unjudged_warning(mean, len(ranked), lambda: (g for judged in qrels.values() for g in judged.values()))


def _note_default_judge() -> None:
    """Says which judge decided the matches when none was named: a strict default must not read as a bad
    retriever."""
    from evret_core.judge.resolve import DEFAULT_JUDGE

    print(f"note: matches judged by the default judge, {DEFAULT_JUDGE} (an expected answer matches only a passage "
          f"that holds all its words, normalised, as one contiguous run); for answers labelled as whole sentences "
          f"name a looser one (--judge token-overlap, semantic or llm, or a [judge] table in the config)",
          file=sys.stderr)


def _print_plan(plan: dict[str, Any]) -> None:
    """The --dry-run summary: judgments that would be sent and what they would cost in tokens."""
    where = f" ({plan['provider']}, {plan.get('model') or 'default model'})" if plan.get("provider") else ""
    print(f"dry run{where}: {plan['contexts']} judgment(s) planned, {plan['unique']} distinct, "
          f"{plan['cached']} cached, {plan['to_send']} would be sent")
    if "estimated_input_tokens" in plan:
        print(f"estimated tokens: ~{plan['estimated_input_tokens']} input, at most "
              f"{plan['estimated_output_tokens_max']} output")
    if plan.get("note"):
        print(plan["note"])


def _print_judged(judged: dict[str, Any] | None) -> None:
    """What a judge that needs no expected answer graded, and the level the binary measures used."""
    if not judged:
        return
    histogram = ", ".join(f"{grade}: {count}" for grade, count in judged["histogram"].items())
    scale = f"0-{judged['grades']}" if judged.get("grades") else "0-1"
    level = judged.get("relevance_level")
    rule = "grade > 0" if level is None else f"grade >= {level:g}"
    unused = judged.get("expected_answers_unused") or 0
    print(f"judged by {visible(str(judged['judge']))!r} without expected answers: {judged['pairs']} (query, passage) "
          f"grades {scale} ({histogram}{'; ' if histogram else ''}{judged['unmeasured']} unmeasured); binary metrics "
          f"count {rule} as relevant"
          + (f"; the expected answers of {unused} queries were not used" if unused else ""))


def _print_llm_stats(stats: dict[str, Any]) -> None:
    """LLM cost and parse fallbacks after the scores, so a run never hides what it spent or guessed."""
    for provider, cost in (stats.get("cost") or {}).items():
        print(f"{provider} ({cost.get('model')}): {cost.get('calls', 0)} call(s), {cost.get('cache_hits', 0)} "
              f"cache hit(s), {cost.get('input_tokens', 0)} input / {cost.get('output_tokens', 0)} output tokens, "
              f"{cost.get('retries', 0)} retries, {cost.get('failed', 0)} failed")
    parsing = stats.get("parsing") or {}
    if parsing.get("fallbacks"):
        print(f"WARNING: {parsing['fallbacks']} LLM answer(s) did not start with YES or NO: "
              f"{parsing.get('keyword', 0)} decided by keywords, {parsing.get('unparseable', 0)} unparseable "
              f"(counted as not matching)")
