"""``evret generate``: a RAG question set generated from a corpus with an LLM, filtered, counts reported."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evret_core.io.options import parse_options


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("generate", help="generate a question set (with answers and aliases) from a corpus")
    p.add_argument("--corpus", required=True, help="corpus .jsonl (or a BEIR folder's corpus.jsonl)")
    p.add_argument("--provider", help="LLM provider (openai, anthropic, google, ...; a plugin's); default openai "
                                      "(evret-openai, key from OPENAI_API_KEY)")
    p.add_argument("--model", help="the provider's model (default: the provider's own default)")
    p.add_argument("--llm-option", action="append", metavar="KEY=VALUE",
                   help="LLM setting (base_url, temperature, max_concurrency, rpm, cache...); repeatable")
    p.add_argument("-n", type=int, default=50, help="questions to plan (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling (default 0)")
    p.add_argument("--types", help="question types and weights, e.g. factoid=0.5,multi-hop=0.2,comparison=0.15,"
                                   "unanswerable=0.15 (the default)")
    p.add_argument("--stratify-by", metavar="FIELD",
                   help="corpus field whose values are the strata (default: quartiles of document length)")
    p.add_argument("--no-closed-book", action="store_true",
                   help="skip the check that drops questions the model answers without the sources")
    p.add_argument("--dedupe-threshold", type=float, default=0.8,
                   help="drop a question whose content words overlap an earlier one's this much (Jaccard)")
    p.add_argument("--output", help="write the question set (JSONL) here")
    p.add_argument("--dry-run", action="store_true", help="plan and count calls and tokens; call nothing")
    p.add_argument("--json", action="store_true", help="print the plan or the run's summary as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from evret_core.contracts.errors import EvretError
    from evret_core.io.corpus import iter_corpus
    from evret_core.io.outputs import check_outputs
    from evret_core.limits import MAX_SEED, check_float, check_int
    from evret_core.testsets import TestsetGenerator, stratified_sample
    from evret_core.testsets.sampling import parse_mix

    check_int(args.seed, "--seed", 0, MAX_SEED)
    check_int(args.n, "-n", 1, 100_000)
    check_float(args.dedupe_threshold, "--dedupe-threshold", 0.0, 1.0)
    check_outputs({"--output": args.output}, inputs=[args.corpus],
                  options=[pair.partition("=")[2] for pair in args.llm_option or []])  # an LLM's cache=...
    if not args.output and not args.dry_run:
        raise EvretError("missing --output (where the question set goes), or use --dry-run")
    corpus = {doc_id: record for _where, doc_id, record in iter_corpus(args.corpus)}
    if not corpus:
        raise EvretError(f"{args.corpus}: the corpus has no documents")
    options = parse_options(args.llm_option, "--llm-option")
    options.update({k: v for k, v in (("provider", args.provider), ("model", args.model)) if v is not None})
    generator = TestsetGenerator(corpus, closed_book=not args.no_closed_book,
                                 dedupe_threshold=args.dedupe_threshold, **options)
    samples = stratified_sample(corpus, args.n, args.seed, parse_mix(args.types), args.stratify_by)
    if args.dry_run:
        plan = generator.plan(samples)
        print(json.dumps(plan, indent=2) if args.json else plan_text(plan))
        return 0
    result = generator.generate(args.n, seed=args.seed, samples=samples)
    result.to_jsonl(args.output)
    summary = result.summary()
    print(json.dumps(summary, indent=2) if args.json else summary_text(summary))
    for item in result.unmeasured[:5]:
        print(f"WARNING: {item['question_id']}: {item['reason']}", file=sys.stderr)
    print(f"{summary['kept']} question(s) written to {args.output}", file=sys.stderr)
    return 0


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"


def plan_text(plan: dict[str, Any]) -> str:
    """The ``--dry-run`` plan as ``evret evaluate --dry-run`` and ``evret rag --dry-run`` print theirs."""
    return (f"dry run: {plan['questions']} question(s) planned ({_counts(plan['by_type'])})\n"
            f"calls: {plan['generation_calls']} generation, {plan['closed_book_calls']} closed-book check(s)\n"
            f"estimated input tokens: ~{plan['input_tokens_estimate']}")


def summary_text(summary: dict[str, Any]) -> str:
    """A run's summary: what was kept, what each filter dropped, and what the LLM calls cost."""
    usage = summary.get("usage") or {}
    return (f"{summary['kept']} of {summary['seen']} question(s) kept; dropped: {_counts(summary['dropped'])}\n"
            f"by type: {_counts(summary['by_type'])}\n"
            f"unmeasured: {summary['unmeasured']}\n"
            f"LLM: {usage.get('calls', 0)} call(s), {usage.get('failed', 0)} failed, {usage.get('retries', 0)} "
            f"retries, {usage.get('input_tokens', 0)} input / {usage.get('output_tokens', 0)} output tokens")
