"""``evret score``: score the records of a JSONL file with an output evaluator type or a criteria judge."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evret_core.cli.options import parse_options
from evret_core.errors import EvretError


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
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise EvretError(f"{path}: no such records file") from None
    except UnicodeDecodeError as exc:
        raise EvretError(f"{path}: not UTF-8 text ({exc})") from None
    records: list[dict[str, Any]] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvretError(f"{path}:{line_no}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(value, dict):
            raise EvretError(f"{path}:{line_no}: expected a JSON object, got {type(value).__name__}")
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


def run(args: argparse.Namespace) -> int:
    from evret_core.registry import create_evaluator
    from evret_core.results import atomic_write_text

    options = parse_options(args.option, "--option")
    if args.output:
        out_dir = Path(args.output).parent
        if str(out_dir) and not out_dir.exists():
            raise EvretError(f"--output {args.output}: folder {out_dir} does not exist")
    evaluator = create_evaluator(args.evaluator, **options)
    if not hasattr(evaluator, "evaluate"):
        raise EvretError(f"--evaluator {args.evaluator!r} does not score records; use 'evret evaluate' for retrieval")
    records = read_records(args.records)
    results = evaluator.evaluate(records)
    rows = result_rows(results, records)
    if hasattr(results, "summary_lines"):
        for line in results.summary_lines():
            print(line)
    else:
        mean = results.mean
        shown = "n/a" if mean is None else f"{mean:.4f}"
        missing = len(getattr(results, "unmeasured", []) or [])
        note = f" ({missing} unmeasured, left out of the mean)" if missing else ""
        print(f"{args.evaluator}: mean {shown} over {len(records)} records{note}")
    unmeasured = [row for row in rows if row.get("score") is None and "error" in row]
    for row in unmeasured:
        print(f"unmeasured: record {row['record']}: {row['error']}", file=sys.stderr)
    if args.output:
        atomic_write_text(Path(args.output), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        print(f"per-record scores written to {args.output}", file=sys.stderr)
    return 0
