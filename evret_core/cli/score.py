"""``evret score``: score the records of a JSONL file with an output evaluator type or a criteria judge."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.options import parse_options


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("score", help="score pipeline outputs (records JSONL) with an evaluator type")
    p.add_argument("records", metavar="RECORDS.jsonl",
                   help='one JSON object per line: {"input": ..., "output": "...", "target": ...}')
    p.add_argument("--evaluator", required=True, help="registered evaluator type, e.g. exact, regex, llm-score")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="evaluator option (repeatable)")
    p.add_argument("--output", help="write one JSON line of score and details per record here")
    p.set_defaults(func=run)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (blank lines skipped); errors name the file and line."""
    from evret_core.io.jsonio import iter_json_lines

    records: list[dict[str, Any]] = []
    for _line, where, value in iter_json_lines(path, what="records file"):
        if not isinstance(value, dict):
            raise EvretError(f"{where}: expected a JSON object, got {type(value).__name__}")
        records.append(value)
    if not records:
        raise EvretError(f"{path}: no records")
    return records


def result_rows(results: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One output row per record: the results' own ``rows()`` when they have it, else score plus details."""
    if hasattr(results, "rows"):
        rows: list[dict[str, Any]] = results.rows()
    else:
        details = list(getattr(results, "details", None) or [{} for _ in results.scores])
        rows = [{"score": score, **detail} for score, detail in zip(results.scores, details, strict=True)]
    out = []
    for i, (row, record) in enumerate(zip(rows, records, strict=True)):
        head: dict[str, Any] = {"record": i + 1}
        if "id" in record:
            head["id"] = record["id"]
        out.append({**head, **row})
    return out


def check_results(name: str, results: Any, n: int) -> None:
    """An evaluator's ``evaluate()`` answer has what ``evret score`` reads: ``rows()``, or ``scores`` (one per
    record) and ``mean``; else an error naming the evaluator, not a traceback."""
    if hasattr(results, "rows"):
        return
    scores = getattr(results, "scores", None)
    if not isinstance(scores, list) or not hasattr(results, "mean"):
        raise EvretError(f"--evaluator {name!r}: evaluate() returned {type(results).__name__}, not results with "
                         "'scores' (one per record) and 'mean'; see docs/hooks.md#register_evaluators")
    if len(scores) != n:
        raise EvretError(f"--evaluator {name!r}: evaluate() gave {len(scores)} scores for {n} records")


def run(args: argparse.Namespace) -> int:
    from evret_core.io.outputs import check_outputs, write_output
    from evret_core.plugins.registry import create_evaluator

    options = parse_options(args.option, "--option")
    check_outputs({"--output": args.output}, inputs=[args.records], options=[options])
    evaluator = create_evaluator(args.evaluator, **options)
    if not hasattr(evaluator, "evaluate"):
        raise EvretError(f"--evaluator {args.evaluator!r} does not score records; use 'evret evaluate' for retrieval")
    records = read_records(args.records)
    results = evaluator.evaluate(records)
    check_results(args.evaluator, results, len(records))
    rows = result_rows(results, records)
    if args.output:  # before printing: a closed pipe on standard output must not lose the file
        write_output(args.output, (json.dumps(r, ensure_ascii=False) + "\n" for r in rows), option="--output")
    summary = sys.stderr if args.output == "-" else sys.stdout  # with --output - the rows are standard output
    if hasattr(results, "summary_lines"):
        for line in results.summary_lines():
            print(line, file=summary)
    else:
        mean = results.mean
        shown = "n/a" if mean is None else f"{mean:.4f}"
        missing = len(getattr(results, "unmeasured", []) or [])
        note = f" ({missing} unmeasured, left out of the mean)" if missing else ""
        print(f"{args.evaluator}: mean {shown} over {len(records)} records{note}", file=summary)
    unmeasured = [row for row in rows if row.get("score") is None and "error" in row]
    for row in unmeasured:
        print(f"unmeasured: record {row['record']}: {row['error']}", file=sys.stderr)
    if args.output and args.output != "-":
        print(f"per-record scores written to {args.output}", file=sys.stderr)
    return 0
