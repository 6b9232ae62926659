"""``evret rag``: evaluate a RAG system's retrieval and generation, separately and jointly."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evret_core.cli._tracking import add_tracking_arguments, check_tracking_arguments, log_run
from evret_core.cli.gating import add_gate_arguments, check_gate_arguments, run_gates
from evret_core.cli.options import config_error, load_config, parse_options
from evret_core.errors import EvretError

# config key -> the type it must have
CONFIG_KEYS: dict[str, type | tuple[type, ...]] = {
    "dataset": str, "corpus": str, "output": str, "retriever": (str, dict), "generator": (str, dict),
    "claim_judge": (str, dict), "answer_judge": (str, dict), "relevance": (str, dict), "conditions": list, "k": int,
    "correct_f1": (int, float), "confidence_level": float, "n_resamples": int, "seed": int, "pipelined": bool,
    "adversarial": list, "adversarial_base": str, "cases": str, "write_cases": str, "executor": (str, dict),
    "dataset_format": str,
}
NAMED_KEYS = ("retriever", "generator", "claim_judge", "answer_judge", "relevance", "executor")
PATH_KEYS = ("dataset", "corpus", "output", "cases", "write_cases")
PATH_OPTION_SUFFIXES = ("corpus", "path", "file", "dir")
DATASET_FORMATS = ("rgb",)
BUILTIN_CONDITIONS = ("gold", "retrieved")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("rag", help="evaluate retrieval and generation of a RAG system, separately and jointly")
    p.add_argument("--dataset", help="question set: .jsonl (with --corpus) or a SQuAD-format .json")
    p.add_argument("--corpus", help="corpus .jsonl that gold ids point into (for .jsonl question sets)")
    p.add_argument("--dataset-format", choices=DATASET_FORMATS,
                   help="read --dataset as this format instead of by its suffix: rgb (RGB's JSON lines: query, "
                        "answer, positive, negative, and fakeanswer / positive_wrong for counterfactual robustness)")
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
    add_gate_arguments(p, example="retrieved/correct=0.5")
    add_tracking_arguments(p)
    p.add_argument("--dry-run", action="store_true",
                   help="retrieve and plan: print the generator, claim-judge and relevance calls and estimated tokens "
                        "(after the cache) without calling any LLM")
    p.add_argument("--no-progress", action="store_true", help="never show progress (shown only on a terminal)")
    p.set_defaults(func=run)


def _named(value: Any, where: str, key: str) -> tuple[str, dict[str, Any]]:
    if isinstance(value, str):
        return value, {}
    options = dict(value)
    name = options.pop("name", None)
    if not isinstance(name, str) or not name:
        raise config_error(where, f"{key}.name", "missing or not a string")
    return name, options


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    """Config file, then command-line options (which win); paths in the file are relative to it."""
    s: dict[str, Any] = {f"{k}_options": {} for k in NAMED_KEYS}
    if args.config:
        data = load_config(args.config)
        base = Path(args.config).parent
        value: Any
        for key, value in data.items():
            kind = CONFIG_KEYS.get(key)
            if kind is None:
                raise config_error(args.config, key, f"unknown setting; known settings are {', '.join(CONFIG_KEYS)}")
            right_type = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
            if not right_type:
                raise config_error(args.config, key, f"has the wrong type ({type(value).__name__})")
            if key in NAMED_KEYS:
                name, options = _named(value, args.config, key)
                s[key] = name
                s[f"{key}_options"] = {o: _relative(base, o, v) for o, v in options.items()}
                if key == "generator" and name.lower().endswith(".jsonl") and not Path(name).is_absolute():
                    s[key] = str(base / name)
            elif key in PATH_KEYS:
                s[key] = value if Path(value).is_absolute() else str(base / value)
            elif key in ("conditions", "adversarial"):
                if not all(isinstance(c, str) for c in value):
                    raise config_error(args.config, key, "must be a list of names such as ['gold', 'retrieved']")
                s[key] = value
            else:
                s[key] = value
    for key in ("dataset", "dataset_format", "corpus", "output", "retriever", "generator", "claim_judge", "answer_judge", "relevance",
                "executor", "k", "correct_f1", "seed", "n_resamples", "adversarial_base", "cases", "write_cases"):
        value = getattr(args, key, None)
        if value is not None:
            if key in NAMED_KEYS and s.get(key) not in (None, value):
                s[f"{key}_options"] = {}  # the file's options were for the part it named, not this one
            s[key] = value
    if args.conditions is not None:
        s["conditions"] = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if args.adversarial is not None:
        s["adversarial"] = [c.strip() for c in args.adversarial.split(",") if c.strip()]
        if not s["adversarial"]:
            raise EvretError("--adversarial: name at least one family, e.g. counterfactual,injection")
    s["retriever_options"].update(parse_options(args.retriever_option, "--retriever-option"))
    s["generator_options"].update(parse_options(args.generator_option, "--generator-option"))
    s["claim_judge_options"].update(parse_options(args.claim_judge_option, "--claim-judge-option"))
    s["relevance_options"].update(parse_options(args.relevance_option, "--relevance-option"))
    s["executor_options"].update(parse_options(args.executor_option, "--executor-option"))
    if args.staged:
        s["pipelined"] = False
    for required, flag in (("dataset", "--dataset"), ("generator", "--generator")):
        if not s.get(required):
            raise EvretError(f"missing {flag} (or '{required}' in the --config file)")
    conditions = s.setdefault("conditions", ["gold", "retrieved"])
    if "retrieved" in conditions and not s.get("retriever"):
        raise EvretError("the retrieved condition needs --retriever (or pass --conditions gold)")
    return s


def _relative(base: Path, name: str, value: Any) -> Any:
    if isinstance(value, str) and name.endswith(PATH_OPTION_SUFFIXES) and not Path(value).is_absolute():
        return str(base / value)
    return value


def build_retriever(name: str, options: dict[str, Any], questions: Any) -> Any:
    """A registered retriever over the question set's corpus unless the options name another corpus."""
    import inspect

    from evret_core.data.models import EvaluationDataset
    from evret_core.plugins.loading import get_registry
    from evret_core.plugins.registry import create_retriever

    factory = get_registry().get("retriever", name)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    if "corpus" not in options and questions.corpus:
        if "corpus" in params:
            options = {**options, "corpus": questions.corpus}
        elif "dataset" in params:
            options = {**options, "dataset": EvaluationDataset(queries=[], corpus=questions.corpus)}
    try:
        return create_retriever(name, **options)
    except EvretError as exc:
        # a .jsonl question set without --corpus: the retriever's own message names its option, not --corpus
        if "corpus" in options or questions.corpus or "corpus" not in str(exc):
            raise
        raise EvretError(f"--retriever {name} has no corpus to index: give --corpus CORPUS.jsonl, the corpus the "
                         f"question set's gold ids point into ({exc})") from None


def check_rag_outputs(s: dict[str, Any], args: argparse.Namespace) -> str | None:
    """The output guard, before any work: --output and --write-cases against each other and every input (the
    question set, corpus, cases, config, baseline, a precomputed answers file, files named by options), and the
    --mlflow store against the inputs; returns the tracking URI (None without --mlflow)."""
    from evret_core.results.outputs import check_outputs, files_named

    inputs = [s.get("dataset"), s.get("corpus"), s.get("cases"), args.config, args.baseline]
    options = [s.get(key) for key in NAMED_KEYS] + [s[f"{key}_options"] for key in NAMED_KEYS]
    check_outputs({"--output": s.get("output"), "--write-cases": s.get("write_cases")}, inputs=inputs,
                  options=options)
    return check_tracking_arguments(args, [*inputs, *files_named(options)])


def load_questions(s: dict[str, Any]) -> Any:
    """The question set: by ``dataset_format`` when given (``rgb``), else by the dataset's suffix."""
    from evret_core.rag import QuestionSet

    fmt = s.get("dataset_format")
    if fmt is None:
        return QuestionSet.load(s["dataset"], s.get("corpus"))
    if fmt not in DATASET_FORMATS:
        raise EvretError(f"dataset_format: unknown format {fmt!r}; use {', '.join(DATASET_FORMATS)}")
    if s.get("corpus"):
        raise EvretError(f"--dataset-format {fmt}: the file carries its own passages; drop --corpus")
    from evret_core.rag.questions.rgb import read_rgb

    return read_rgb(s["dataset"])


def run(args: argparse.Namespace) -> int:
    from evret_core.plugins.registry import create_judge
    from evret_core.rag import RagEvaluator, RagResults
    from evret_core.report.rag_tables import print_plan, print_rag

    # everything a user can get wrong is checked here, before the question set is read or any part is built
    s = settings_from(args)
    check_numbers(args, s)
    conditions = rag_conditions(s)
    if s.get("write_cases") and all(getattr(c, "name", c) in BUILTIN_CONDITIONS for c in conditions):
        raise EvretError("--write-cases: the run has no adversarial conditions to write (add --adversarial "
                         "FAMILIES, or --cases CASES.jsonl)")
    floors = check_gate_arguments(args, score_names(conditions, s), "--conditions or --adversarial")
    baseline = None
    if args.baseline:  # read before any work: a bad baseline file must not cost a run
        from evret_core.statistics.gates import rag_scores

        baseline = rag_scores(RagResults.from_json(args.baseline))
    tracking = check_rag_outputs(s, args)
    questions = load_questions(s)
    retriever = build_retriever(s["retriever"], s["retriever_options"], questions) if s.get("retriever") else None
    answer_judge = None
    if s.get("answer_judge"):
        answer_judge = create_judge(s["answer_judge"], **s["answer_judge_options"])
    from evret_core.progress import terminal_progress

    progress = None if getattr(args, "no_progress", False) else terminal_progress()
    evaluator = RagEvaluator(
        retriever=retriever, generator=s["generator"], generator_options=s["generator_options"] or None,
        conditions=conditions, k=s.get("k", 5), claim_judge=s.get("claim_judge", "token-overlap"),
        claim_judge_options=s["claim_judge_options"] or None, relevance=s.get("relevance", "lexical"),
        relevance_options=s["relevance_options"] or None, pipelined=s.get("pipelined", True),
        answer_judge=answer_judge, executor=s.get("executor"), executor_options=s["executor_options"] or None,
        correct_f1=s.get("correct_f1", 0.5), confidence_level=s.get("confidence_level", 0.95),
        n_resamples=s.get("n_resamples", 1000), seed=s.get("seed", 0), progress=progress,
    )
    try:
        if args.dry_run:
            plan = evaluator.dry_run(questions)
        else:
            results = evaluator.evaluate(questions)
    finally:
        if progress is not None:
            progress.close()
    if args.dry_run:
        print_plan(plan, file=sys.stdout)
        return 0
    from evret_core.results.outputs import STDOUT

    # written first, printed after: a closed pipe on standard output must not lose the files
    if s.get("write_cases"):
        from evret_core.rag.perturb.cases import write_cases

        written = {name: column for name, column in evaluator.last_cases.items() if name not in BUILTIN_CONDITIONS}
        results.config["adversarial_cases"] = {"path": s["write_cases"],
                                               "sha256": write_cases(s["write_cases"], questions, written)}
    if s.get("output"):
        results.to_json(s["output"])
    table = sys.stderr if STDOUT in (s.get("output"), s.get("write_cases")) else sys.stdout
    print_rag(results, title=f"{Path(s['dataset']).name}: {len(questions)} questions", file=table,
              all_pairs=args.all_pairs)
    for key, what in (("write_cases", "adversarial cases"), ("output", "results")):
        if s.get(key) and s[key] != STDOUT:
            print(f"{what} written to {s[key]}", file=sys.stderr)
    log_run(args, tracking, results)  # after the results files: a tracking failure must not lose them
    from evret_core.statistics.gates import rag_scores

    return run_gates(args, floors, rag_scores(results), lambda _path: baseline)


def rag_conditions(s: dict[str, Any]) -> list[Any]:
    """The run's conditions: the named ones, one per adversarial family, and those of a --cases file (read now:
    a bad cases file fails before any work)."""
    conditions: list[Any] = list(s["conditions"])
    if s.get("adversarial"):
        from evret_core.rag.perturb.cases import adversarial_conditions

        base = s.get("adversarial_base") or ("retrieved" if s.get("retriever") else "gold")
        conditions += adversarial_conditions(s["adversarial"], base=base, seed=s.get("seed", 0))
    if s.get("cases"):
        from evret_core.rag.perturb.cases import read_cases

        conditions += read_cases(s["cases"])
    return conditions


def check_numbers(args: argparse.Namespace, s: dict[str, Any]) -> None:
    """Seed, depth and resamples in their bounds (:mod:`evret_core.limits`), before any work; errors name the flag,
    or the config file and its option."""
    from evret_core.limits import MAX_DEPTH, MAX_RESAMPLES, MAX_SEED, check_int

    for key, flag, low, high in (("seed", "--seed", 0, MAX_SEED), ("k", "-k", 1, MAX_DEPTH),
                                 ("n_resamples", "--resamples", 1, MAX_RESAMPLES)):
        if key in s:
            source = flag if getattr(args, key, None) is not None else f"{args.config}: option {key!r}:"
            check_int(s[key], source, low, high)


def score_names(conditions: list[Any], s: dict[str, Any]) -> list[str]:
    """The gateable scores a run over ``conditions`` with settings ``s`` can have (``retrieval/recall@5``,
    ``gold/correct``...)."""
    from evret_core.rag.harness import score_names as names
    from evret_core.rag.questions.conditions import resolve_conditions

    return names(resolve_conditions(conditions), s.get("k", 5), answer_judge=bool(s.get("answer_judge")),
                 relevance=s.get("relevance", "lexical") not in (None, "none"))
