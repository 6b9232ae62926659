"""``evret rag``: evaluate a RAG system's retrieval and generation, separately and jointly."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evret_core.cli._conversation import add_history_window_arguments
from evret_core.cli._failures import EndOfRun, add_end_of_run_arguments
from evret_core.cli._tracking import add_tracking_arguments, check_tracking_arguments, log_run, note_dry_run
from evret_core.cli.gating import add_gate_arguments, check_gate_arguments, run_gates
from evret_core.contracts.errors import EvretError, visible

if TYPE_CHECKING:  # evret_core.rag.rag_config needs pydantic: imported when the command runs
    from evret_core.rag.rag_config import RagConfig

DATASET_FORMATS = ("rgb", "conversations", "mtrag")
BUILTIN_CONDITIONS = ("gold", "retrieved")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("rag", help="evaluate retrieval and generation of a RAG system, separately and jointly")
    p.add_argument("--dataset", help="question set: .jsonl (with --corpus) or a SQuAD-format .json; or a conversation "
                                     "dataset (a .jsonl whose records have 'turns', or --dataset-format mtrag)")
    p.add_argument("--corpus", help="corpus .jsonl that gold ids point into (for .jsonl question sets)")
    p.add_argument("--dataset-format", choices=DATASET_FORMATS,
                   help="read --dataset as this format instead of by its suffix: rgb (RGB's JSON lines: query, "
                        "answer, positive, negative, and fakeanswer / positive_wrong for counterfactual robustness), "
                        "conversations (the conversation JSONL) or mtrag (MTRAG data): each turn labelled for "
                        "generation is a question")
    p.add_argument("--retriever", help="registered retriever name, e.g. bm25 (indexes the corpus by default)")
    p.add_argument("--retriever-option", action="append", metavar="KEY=VALUE", help="retriever option (repeatable)")
    p.add_argument("--generator", help="registered generator name (extractive, llm) or a precomputed answers .jsonl")
    p.add_argument("--generator-option", action="append", metavar="KEY=VALUE",
                   help="generator option (repeatable), e.g. provider=openai, model=..., max_concurrency=20")
    p.add_argument("--conditions", help="comma-separated context conditions: gold, retrieved (default both)")
    p.add_argument("-k", "--k", type=int, help="retrieved contexts the generator sees (default 5)")
    p.add_argument("--claim-judge", help="a registered claim judge (llm: LLM claim extraction and verification; "
                                         "lexical; a plugin's) or an Evret judge deciding claim support lexically "
                                         "(default token-overlap)")
    p.add_argument("--claim-judge-option", action="append", metavar="KEY=VALUE",
                   help="claim judge option (repeatable), e.g. provider=openai for --claim-judge llm")
    p.add_argument("--relevance", help="answer relevance: lexical (offline, default), llm, or none")
    p.add_argument("--relevance-option", action="append", metavar="KEY=VALUE",
                   help="option of --relevance llm (repeatable), e.g. provider=openai")
    p.add_argument("--executor", help="where retrieval, generation and the judges run: local (default) or a "
                                      "plugin's executor, e.g. ray (evret-ray)")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE",
                   help="executor option (repeatable), e.g. address=auto or max_in_flight=40 for ray")
    p.add_argument("--staged", action="store_true",
                   help="generate everything, then judge everything (default: judge each answer as it arrives)")
    p.add_argument("--answer-judge", help="an Evret judge that also decides answer correctness (optional)")
    p.add_argument("--retrieval-judge", metavar="NAME",
                   help="the Evret judge that decides which retrieved passages hold the answer of a question labelled "
                        "by answer texts only (default token-overlap; contains, semantic, llm, a plugin's)")
    p.add_argument("--retrieval-judge-option", action="append", metavar="KEY=VALUE",
                   help="retrieval judge option (repeatable), e.g. overlap_ratio=0.8")
    p.add_argument("--correct-f1", type=float, help="an answer with F1 above this counts as right (default 0.5)")
    p.add_argument("--config", help="TOML file with the same settings; command-line options win")
    p.add_argument("--output", help="write the results JSON here (only when the run succeeds)")
    p.add_argument("--seed", type=int, help="seed of the bootstrap and of perturbations (default 0)")
    p.add_argument("--resamples", dest="n_resamples", type=int, help="bootstrap resamples (default 1000)")
    p.add_argument("--adversarial", metavar="FAMILIES",
                   help="comma-separated adversarial conditions: counterfactual, injection, missing-gold, "
                        "irrelevant-only (or a plugin's)")
    p.add_argument("--adversarial-base", choices=["gold", "retrieved"],
                   help="contexts the adversarial cases perturb (default retrieved with a retriever, else gold)")
    p.add_argument("--cases", metavar="CASES.jsonl", help="replay adversarial cases written by --write-cases")
    p.add_argument("--write-cases", metavar="CASES.jsonl",
                   help="write the adversarial cases of this run (to inspect, edit and replay with --cases)")
    p.add_argument("--all-pairs", action="store_true",
                   help="print every condition's intervals, every pairwise condition difference and the adversarial "
                        "families' weakest slices (default with more than two conditions: a compact table)")
    _add_conversation_arguments(p)
    add_end_of_run_arguments(p)
    add_gate_arguments(p, example="retrieved/correct=0.5")
    add_tracking_arguments(p)
    p.add_argument("--dry-run", action="store_true",
                   help="retrieve and plan: print the generator, claim-judge and relevance calls and estimated tokens "
                        "(after the cache) without calling any LLM")
    p.add_argument("--no-progress", action="store_true", help="never show progress (shown only on a terminal)")
    p.set_defaults(func=run)


def _add_conversation_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("conversation datasets (docs/rag.md, Conversations)")
    g.add_argument("--query-form", choices=["last_turn", "full_history", "rewrite", "rewriter"],
                   help="the text each turn is retrieved with (default last_turn; the generator always sees the "
                        "user's message)")
    add_history_window_arguments(g, "registered rewriter for --query-form rewriter, e.g. carry-terms or llm")
    g.add_argument("--history", choices=["reference", "generated"],
                   help="each turn's history: reference (default: the dataset's own replies, every turn independent) "
                        "or generated (the system's own earlier answers under each condition, answered in waves)")
    g.add_argument("--claims-history", choices=["all", "user", "none"],
                   help="what the claim judges see of a turn's earlier messages: all (default, as MTRAG's raters "
                        "saw the conversation), user, none")


def settings_from(args: argparse.Namespace) -> RagConfig:
    """The config file's settings, then the command line's on top, as a
    :class:`~evret_core.rag.rag_config.RagConfig` (:meth:`~evret_core.io.run_config.Config.from_args`); errors name
    the file and option, or the flag. The retrieved condition needs a retriever."""
    from evret_core.rag.rag_config import RagConfig

    config = RagConfig.from_args(args)
    config.check_settings()
    if "retrieved" in config.conditions and config.retriever is None:
        raise EvretError("the retrieved condition needs --retriever (or pass --conditions gold)")
    return config


def run(args: argparse.Namespace) -> int:
    from evret_core.rag import RagResults
    from evret_core.report.rag_tables import print_plan, print_rag

    # everything a user can get wrong is checked here, before the question set is read or any part is built
    config = settings_from(args)
    conditions = config.run_conditions()
    if config.write_cases and all(getattr(c, "name", c) in BUILTIN_CONDITIONS for c in conditions):
        raise EvretError("--write-cases: the run has no adversarial conditions to write (add --adversarial "
                         "FAMILIES, or --cases CASES.jsonl)")
    floors = check_gate_arguments(args, config.score_names(conditions), "--conditions or --adversarial")
    baseline = None
    if args.baseline:  # read before any work: a bad baseline file must not cost a run
        baseline = RagResults.from_json(args.baseline).score_view()
    tracking = check_rag_outputs(config, args)
    questions = config.load_questions()
    for warning in questions.warnings:  # what the reader kept but will not use as the file meant (fake answers)
        print(f"WARNING: {visible(warning)}", file=sys.stderr)
    from evret_core.progress import terminal_progress

    progress = None if getattr(args, "no_progress", False) else terminal_progress()
    evaluator = config.build_evaluator(questions, conditions, progress)
    import warnings

    from evret_core.evaluation.evaluator import EmptyRetrievalWarning

    try:
        with warnings.catch_warnings():  # said after the tables (check_end_of_run)
            warnings.simplefilter("ignore", EmptyRetrievalWarning)
            if args.dry_run:
                plan = evaluator.dry_run(questions)
            else:
                results = evaluator.evaluate(questions)
    finally:
        if progress is not None:
            progress.close()
    if args.dry_run:
        print_plan(plan, file=sys.stdout)
        note_dry_run(tracking)
        return 0
    from evret_core.io.outputs import STDOUT

    # written first, printed after: a closed pipe on standard output must not lose the files
    config.write(evaluator, questions, results)
    table = sys.stderr if STDOUT in (config.output, config.write_cases) else sys.stdout
    print_rag(results, title=f"{Path(config.dataset).name}: {_count(questions)}", file=table,
              all_pairs=args.all_pairs, warnings=sys.stderr)
    from evret_core.rag.harness import uses_retrieval_judge

    if config.retrieval_judge is None and uses_retrieval_judge(questions, evaluator.conditions):
        _note_default_retrieval_judge()
    for path, what in ((config.write_cases, "adversarial cases"), (config.output, "results")):
        if path and path != STDOUT:
            print(f"{what} written to {path}", file=sys.stderr)
    end = check_end_of_run(args, evaluator, results)
    log_run(args, tracking, results)  # after the results files: a tracking failure must not lose them
    gates = run_gates(args, floors, results.score_view(), lambda _path: baseline)
    return end.report() or gates  # last: the line that says why the run failed is the last one


def _count(questions: Any) -> str:
    """``N questions``, or for a conversation dataset ``N turns of M conversations``."""
    turns = getattr(questions, "turns", None)
    if turns:
        conversations = len({t.conversation_id for t in turns.values()})
        return f"{len(questions)} turns of {conversations} conversation{'s' if conversations != 1 else ''}"
    return f"{len(questions)} questions"


def check_end_of_run(args: argparse.Namespace, evaluator: Any, results: Any) -> EndOfRun:
    """Questions that retrieved nothing and LLM parts whose calls failed (:class:`EndOfRun`)."""
    end = EndOfRun(allow_empty=args.allow_empty_retrieval, allow_unmeasured=args.allow_unmeasured)
    if any(getattr(c, "needs_retrieval", False) for c in evaluator.conditions):
        outcomes = results.per_question
        empty = [qid for qid, outcome in outcomes.items() if not outcome.retrieved_ids]
        if len(empty) == len(outcomes):
            end.empty_retrieval(len(empty), len(outcomes), empty, what="question", plural="questions")
        else:  # a question to refuse may well retrieve nothing: only those with gold are counted
            gold = [qid for qid, outcome in outcomes.items() if outcome.gold_doc_ids or outcome.answers]
            nothing = set(empty)
            empty = [qid for qid in gold if qid in nothing]
            end.empty_retrieval(len(empty), len(gold), empty, what="question", plural="questions with gold")
    for role, stats in (results.stats.get("llm") or {}).items():
        end.llm_part(role, stats)
    return end


def _note_default_retrieval_judge() -> None:
    """Says which judge decided the retrieval matches of text-labelled questions when none was named, as
    ``evret evaluate`` does for its default: the two commands' defaults differ."""
    from evret_core.rag.harness import DEFAULT_RETRIEVAL_JUDGE

    print(f"note: retrieval matches judged by the default judge, {DEFAULT_RETRIEVAL_JUDGE} (evret rag's default; "
          f"evret evaluate's is contains): a passage holds an expected answer when it has the answer's words, "
          f"normalised, as one contiguous run, or most of the answer's words that are not in the question; name "
          f"another with --retrieval-judge (contains for the strict rule, semantic or llm) or a [retrieval_judge] "
          f"table in the config", file=sys.stderr)


def check_rag_outputs(config: RagConfig, args: argparse.Namespace) -> str | None:
    """The output guard, before any work: --output and --write-cases against each other and every input (the
    question set, corpus, cases, config, baseline, a precomputed answers file, files named by options), and the
    --mlflow store against the inputs; returns the tracking URI (None without --mlflow)."""
    extra = [p for p in (args.config, args.baseline) if p]
    config.check_output(inputs=extra)
    return check_tracking_arguments(args, [*config.input_files(), *extra])
