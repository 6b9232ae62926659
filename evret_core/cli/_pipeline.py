"""``evret evaluate`` on a pipeline of stages (``--pipeline FILE``, or a ``[pipeline]`` table in ``--config``): every
stage's metrics, what each stage added over the stages it reads, with paired intervals and Holm-corrected tests,
packing and judging, in the terminal, ``--output`` (JSON) and ``--report`` (Markdown or HTML)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evret_core.cli._failures import EndOfRun, check_unmeasured_flags
from evret_core.contracts.errors import EvretError
from evret_core.evaluation.config import PipelineConfig
from evret_core.evaluation.stages import evaluate_pipeline, parse_pipeline, read_pipeline_file
from evret_core.io.outputs import check_outputs, files_named, write_output
from evret_core.io.run_config import load_toml
from evret_core.progress import after_a_while, progress_scope, terminal_progress
from evret_core.report.stage_report import print_pipeline, render_pipeline

__all__ = ["run_pipeline", "uses_pipeline"]

REPORT_SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}

_UNSUPPORTED = (("dry_run", "--dry-run"), ("baseline", "--baseline"), ("fail_under", "--fail-under"),
                ("gate_metric", "--gate-metric"), ("mlflow", "--mlflow"))


def uses_pipeline(args: argparse.Namespace) -> bool:
    """Whether the command line evaluates a pipeline: ``--pipeline``, or a ``--config`` file with a
    ``[pipeline]`` table."""
    if getattr(args, "pipeline", None):
        return True
    if getattr(args, "config", None):
        return "pipeline" in load_toml(args.config)
    return False


def run_pipeline(args: argparse.Namespace) -> int:
    for key, flag in _UNSUPPORTED:
        if getattr(args, key, None) not in (None, False, []):
            raise EvretError(f"{flag} does not go with a pipeline (it reads one run): evaluate the stage alone")
    config = PipelineConfig.from_args(args)  # the --config file (without its [pipeline]), then the flags
    check_unmeasured_flags(args.allow_unmeasured, config.fail_on_unmeasured)
    if args.pipeline:  # the flag wins over the file's table, as every flag does
        settings = read_pipeline_file(args.pipeline)
    elif config.pipeline is not None:
        settings = parse_pipeline(config.pipeline, f"{args.config} [pipeline]", Path(args.config).parent)
    else:  # pragma: no cover - uses_pipeline said there is one
        raise EvretError("no pipeline given")
    options = [dict(s.component[1]) for s in settings.stages if s.component is not None]
    inputs = [*config.input_files(), *(p for p in (args.config, args.pipeline) if p), *files_named(options)]
    check_outputs({"--output": config.output or None, "--report": args.report or None}, inputs=inputs)
    report_format = None
    if args.report:
        report_format = REPORT_SUFFIXES.get(Path(args.report).suffix.lower())
        if report_format is None:
            raise EvretError(f"--report {args.report}: the suffix says the format: .md (Markdown) or .html")
    progress = None if args.no_progress else terminal_progress()
    with progress_scope(after_a_while(progress)):
        dataset = config.load_dataset()
    for note in dataset.notes:
        print(f"note: {note}", file=sys.stderr)
    results = evaluate_pipeline(
        settings, dataset, config.metrics, judge=config.build_judge(), progress=progress, k=config.k,
        matching=config.matching, fail_on_unmeasured=config.fail_on_unmeasured,
        confidence_level=config.confidence_level, n_resamples=config.n_resamples, seed=config.seed,
        min_slice_size=config.min_slice_size, relevance_level=config.relevance_level,
        executor=config.executor.name if config.executor else None,
        executor_options=dict(config.executor.options) if config.executor else None)
    data = results.to_dict()
    if config.output:  # written first: a closed pipe on standard output must not lose the results
        write_output(config.output, json.dumps(data, indent=2) + "\n", option="--output")
    if args.report and report_format:
        write_output(args.report, render_pipeline(data, report_format), option="--report")
    if progress is not None:
        progress.close()
    table = sys.stderr if config.output == "-" else sys.stdout
    print_pipeline(data, title=f"{dataset.name or 'dataset'}: {len(dataset)} queries, a pipeline of "
                               f"{len(settings.stages)} stages", file=table)
    end = EndOfRun(allow_empty=args.allow_empty_retrieval, allow_unmeasured=args.allow_unmeasured)
    for spec in settings.stages:
        stats = results.stages[spec.name].stats
        empty = stats.get("empty_retrieval") or {}
        if spec.kind != "pack":  # a budget smaller than every passage empties a packed list: that is its figure
            end.empty_retrieval(int(empty.get("count") or 0), len(dataset), list(empty.get("queries") or []),
                                what=f"query of stage {spec.name!r}", plural=f"queries of stage {spec.name!r}")
    first = results.stages[settings.stages[0].name].stats
    if results.judging["judge"] is not None:
        end.judgments({"judgments": {"unique": results.judging["distinct_contexts"],
                                     "unmeasured": max(int((r.stats.get("judgments") or {}).get("unmeasured") or 0)
                                                       for r in results.stages.values())},
                       "judge": first.get("judge")}, str(results.judging["judge"]))
    for path in (config.output, args.report):
        if path and path != "-":
            print(f"written to {path}", file=sys.stderr)
    return end.report()
