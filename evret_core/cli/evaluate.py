"""``evret evaluate``: run a retriever over a dataset, judge, and print the metrics."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

from evret_core.cli.options import config_error, load_config, parse_options
from evret_core.errors import EvretError

CONFIG_KEYS = {"dataset", "retriever", "judge", "executor", "metrics", "matching", "output", "k",
               "fail_on_unmeasured", "missing_queries", "confidence_level", "n_resamples", "seed", "min_slice_size"}
# statistics settings: config key -> (type, command-line flag)
STAT_KEYS = {"confidence_level": (float, "--confidence-level"), "n_resamples": (int, "--resamples"),
             "seed": (int, "--seed"), "min_slice_size": (int, "--min-slice-size")}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evaluate", help="evaluate a retriever on a dataset")
    p.add_argument("--dataset", help="dataset file (.jsonl, .json, .csv) or BEIR folder")
    p.add_argument("--retriever", help="registered retriever name, e.g. bm25")
    p.add_argument("--retriever-option", action="append", metavar="KEY=VALUE", help="retriever option (repeatable)")
    p.add_argument("--judge", help="registered judge name (default: token-overlap)")
    p.add_argument("--judge-option", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--executor", help="where retrieval, judging and metrics run: local (default) or a plugin's "
                                      "executor, e.g. ray (evret-ray)")
    p.add_argument("--executor-option", action="append", metavar="KEY=VALUE",
                   help="executor option (repeatable), e.g. address=auto for ray")
    p.add_argument("--metric", action="append", metavar="NAME@K", help="metric, e.g. ndcg@10 (repeatable)")
    p.add_argument("--matching", choices=["first_match", "any_match"], help="how judgments become ids")
    p.add_argument("-k", "--k", type=int, help="documents to retrieve (default: largest metric cutoff)")
    p.add_argument("--missing-queries", choices=["error", "zero"],
                   help="a precomputed run lacking some queries: fail (default) or score them 0 and report them")
    p.add_argument("--output", help="write the results JSON here (only when the run succeeds)")
    p.add_argument("--config", help="TOML file with the same settings; command-line options win")
    p.add_argument("--fail-on-unmeasured", action="store_true", default=None,
                   help="fail when a judgment could not be made instead of reporting it")
    p.add_argument("--confidence-level", type=float, help="level of the bootstrap intervals (default 0.95)")
    p.add_argument("--resamples", dest="n_resamples", type=int, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, help="seed of the bootstrap (default 0)")
    p.add_argument("--min-slice-size", type=int, help="flag slices with fewer queries than this (default 10)")
    p.add_argument("--no-progress", action="store_true", help="never show progress")
    p.add_argument("--dry-run", action="store_true",
                   help="retrieve and plan: print how many judgments would be sent (after dedupe and cache) and "
                        "a token estimate, without judging or calling any LLM")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {"retriever_options": {}, "judge_options": {}, "executor_options": {}}
    base = Path(".")
    if args.config:
        data = load_config(args.config)
        base = Path(args.config).parent
        unknown = set(data) - CONFIG_KEYS
        if unknown:
            raise config_error(args.config, sorted(unknown)[0],
                               f"unknown setting; known settings are {', '.join(sorted(CONFIG_KEYS))}")
        for key in ("retriever", "judge", "executor"):
            value = data.get(key)
            if value is None:
                continue
            if isinstance(value, str):
                settings[key] = value
            elif isinstance(value, dict):
                options = dict(value)
                name = options.pop("name", None)
                if not isinstance(name, str):
                    raise config_error(args.config, f"{key}.name", "missing or not a string")
                settings[key] = name
                settings[f"{key}_options"] = options
            else:
                raise config_error(args.config, key, "must be a name or a table with 'name'")
        if "metrics" in data:
            metrics = data["metrics"]
            if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
                raise config_error(args.config, "metrics", "must be a list of names such as ['ndcg@10']")
            settings["metrics"] = metrics
        if "k" in data:
            if not isinstance(data["k"], int) or isinstance(data["k"], bool) or data["k"] <= 0:
                raise config_error(args.config, "k", f"must be a positive integer, got {data['k']!r}")
            settings["k"] = data["k"]
        for key in ("dataset", "output", "matching", "missing_queries"):
            if key in data:
                if not isinstance(data[key], str):
                    raise config_error(args.config, key, "must be a string")
                settings[key] = data[key]
        if settings.get("missing_queries", "error") not in ("error", "zero"):
            raise config_error(args.config, "missing_queries", f"must be error or zero, got {settings['missing_queries']!r}")
        if "matching" in settings and settings["matching"] not in ("first_match", "any_match"):
            raise config_error(args.config, "matching", f"must be first_match or any_match, got {settings['matching']!r}")
        for key in ("dataset", "output"):
            if key in settings and not Path(settings[key]).is_absolute():
                settings[key] = str(base / settings[key])
        for key in ("retriever_options", "judge_options"):
            settings[key] = {name: _relative_to(base, name, value) for name, value in settings[key].items()}
        if "fail_on_unmeasured" in data:
            settings["fail_on_unmeasured"] = bool(data["fail_on_unmeasured"])
        for key, (kind, _) in STAT_KEYS.items():
            if key in data:
                value = data[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
                    raise config_error(args.config, key, f"must be {'an integer' if kind is int else 'a number'}, got {value!r}")
                settings[key] = value
    for key in ("dataset", "retriever", "judge", "executor", "matching", "output", "k", "fail_on_unmeasured",
                "missing_queries", *STAT_KEYS):
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    if args.metric:
        settings["metrics"] = args.metric
    settings["retriever_options"].update(parse_options(args.retriever_option, "--retriever-option"))
    settings["judge_options"].update(parse_options(args.judge_option, "--judge-option"))
    settings["executor_options"].update(parse_options(args.executor_option, "--executor-option"))
    for required, flag in (("dataset", "--dataset"), ("retriever", "--retriever"), ("metrics", "--metric")):
        if not settings.get(required):
            raise EvretError(f"missing {flag} (or '{required}' in the --config file)")
    return settings


PATH_OPTION_SUFFIXES = ("corpus", "path", "file", "dir")


def _relative_to(base: Path, name: str, value: Any) -> Any:
    """Config-file options that name files (``corpus``, ``*_path``, ``*_file``, ``*_dir``) are relative to the file."""
    if isinstance(value, str) and name.endswith(PATH_OPTION_SUFFIXES) and not Path(value).is_absolute():
        return str(base / value)
    return value


def build_retriever(name: str, options: dict[str, Any], dataset: Any) -> Any:
    """Create a registered retriever, handing it the dataset when its factory accepts ``dataset``."""
    from evret_core.plugins import get_registry
    from evret_core.registry import create_retriever

    factory = get_registry().get("retriever", name)
    try:
        accepts_dataset = "dataset" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        accepts_dataset = False
    if accepts_dataset and "dataset" not in options:
        options = {**options, "dataset": dataset}
    return create_retriever(name, **options)


def run(args: argparse.Namespace) -> int:
    from evret_core.evaluators.retrieval import Evaluator
    from evret_core.models import EvaluationDataset
    from evret_core.progress import terminal_progress
    from evret_core.registry import create_judge
    from evret_core.report.terminal import print_scores

    settings = _settings(args)
    dataset = EvaluationDataset.load(settings["dataset"])
    retriever = build_retriever(settings["retriever"], settings["retriever_options"], dataset)
    judge = None
    if settings.get("judge") or settings["judge_options"]:
        judge = create_judge(settings.get("judge") or "token-overlap", **settings["judge_options"])
    if settings.get("output"):
        out_dir = Path(settings["output"]).parent
        if str(out_dir) and not out_dir.exists():
            raise EvretError(f"--output {settings['output']}: folder {out_dir} does not exist")
    progress = None if args.no_progress else terminal_progress()
    evaluator = Evaluator(
        retriever=retriever,
        metrics=settings["metrics"],
        judge=judge,
        matching=settings.get("matching", "first_match"),
        k=settings.get("k"),
        fail_on_unmeasured=bool(settings.get("fail_on_unmeasured")),
        missing_queries=settings.get("missing_queries", "error"),
        progress=progress,
        executor=settings.get("executor") or "local",
        executor_options=settings["executor_options"],
        **{key: settings[key] for key in STAT_KEYS if key in settings},
    )
    if getattr(args, "dry_run", False):
        plan = evaluator.dry_run(dataset)
        if progress is not None:
            progress.close()
        _print_plan(plan)
        return 0
    results = evaluator.evaluate(dataset)
    if progress is not None:
        progress.close()
    print_scores(results, title=f"{dataset.name or 'dataset'}: {len(dataset)} queries", file=sys.stdout)
    _print_llm_stats(results.stats)
    missing = results.stats.get("missing_queries")
    if missing:
        shown = ", ".join(missing["queries"][:5]) + (" ..." if missing["count"] > 5 else "")
        print(f"WARNING: {missing['count']} queries missing from the run, scored 0: {shown}", file=sys.stderr)
    if settings.get("output"):
        results.to_json(settings["output"])
        print(f"results written to {settings['output']}", file=sys.stderr)
    return 0


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
