"""MTRAG retrieval per query form over the REDUCED corpus: the 1,488 passages a copy of MTRAG has text for
(against 49k-183k per domain upstream), 238 of the 777 judged turns, qrels limited to passages with text.

Each domain folder is read with ``read_mtrag`` (the reduced corpus of its domain), each scored turn is retrieved by
the ``bm25`` retriever (plugin defaults) under the query forms ``last_turn``, ``rewrite`` and ``full_history``
(``conversation/forms.py``, HistoryWindow defaults) through the single-question evaluator, one query per turn; the
per-turn rows of the four domains are pooled. Intervals are the per-query (per-turn) percentile bootstrap and the
paired tests of ``evret_core.statistics``, Holm-adjusted over the differences; turns of one conversation are not
independent, so these intervals are narrower than the conversation-clustered ones of the turn evaluator.

``--rewriter llm`` adds the ``llm`` rewriter on a real model (SmolLM2-135M-Instruct through evret-transformers,
one torch thread; ``--model``) on a fixed subset: the ``--rewrite-turns`` (40) labelled turns whose SHA-256 of the
turn id comes first (a spread over the conversations that does not depend on file order). The other labelled turns
keep their place as history and lose their labels, so the rewriter is asked about the subset only. The rewrites are
made in file order in chunks of ``--chunk`` (8), each answer cached in SQLite under ``--cache`` as it arrives (a
stopped run resumes), then ONE conversation run (``ConversationEvaluator``: BM25 over the one reduced corpus of
1,488 passages, forms last_turn, rewrite, rewriter, every pair compared; conversation-clustered intervals,
randomization tests with Holm) replays them from the cache:
its rewriter must make 0 model calls. ``--rewriter stub`` times the same rewriter against a zero-latency stub chat
server on 127.0.0.1 (``evret_core.testing.llm_stubs``) on every labelled turn: its overhead per turn.

Usage: nice -n 10 python benchmarks/mtrag_retrieval.py [--shared ../shared] [--json /tmp/evret-bench/mtrag.json]
       [--rewriter llm|stub] [--rewrite-turns 40] [--cache /tmp/evret-bench] [--model smollm2-135m]
Prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from evret_core import EvaluationDataset, Evaluator, create_retriever
from evret_core.conversation.forms import HistoryWindow, form_texts, rewrite_requests
from evret_core.conversation.llm_rewriter import LLMRewriter
from evret_core.conversation.turn_evaluator import ConversationEvaluator
from evret_core.io.conversations import ConversationSet
from evret_core.io.mtrag import DOMAINS, read_mtrag
from evret_core.statistics.inference import (
    bootstrap_interval,
    bootstrap_intervals,
    holm_bonferroni,
    paired_randomization_test,
    paired_t_test,
)

REPO = Path(__file__).resolve().parents[1]
FORMS = ["last_turn", "rewrite", "full_history"]
METRICS = ["ndcg@10", "recall@10"]
PUBLISHED = "BM25 nDCG@10 0.21 (last turn) -> 0.25 (rewrite), BGE-base 0.30 -> 0.38, on the whole corpora (upstream README)"


def domain_scores(folder: Path) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, Any]]:
    """form -> turn id -> metric -> value for one domain folder, and facts about the run."""
    dataset = read_mtrag(folder)
    labelled = dataset.labelled_turns()
    texts = form_texts([c for c in dataset.conversations], FORMS, HistoryWindow())
    corpus_only = EvaluationDataset(name=dataset.name, corpus={k: dict(v) for k, v in (dataset.corpus or {}).items()}, queries=[
        labelled[0][1].query(labelled[0][1].turn_id, labelled[0][1].user)])
    started = time.perf_counter()
    retriever = create_retriever("bm25", dataset=corpus_only)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for form in FORMS:
        queries = [turn.query(turn.turn_id, text) for _, turn in labelled
                   if (text := texts[form][turn.turn_id]) is not None]
        forms_dataset = EvaluationDataset(name=f"{dataset.name}-{form}", corpus=corpus_only.corpus, queries=queries)
        results = Evaluator(retriever, metrics=METRICS, k=10).evaluate(forms_dataset)
        out[form] = results.per_query_scores()
    facts = {"turns": len(labelled), "conversations": len({c.conversation_id for c, _ in labelled}),
             "passages": len(dataset.corpus or {}), "seconds": time.perf_counter() - started,
             "conversation_of": {t.turn_id: c.conversation_id for c, t in labelled}}
    return out, facts


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def subset(dataset: ConversationSet, size: int) -> tuple[ConversationSet, list[str]]:
    """``dataset`` with only the ``size`` labelled turns whose SHA-256 of the turn id comes first still labelled
    (the others stay as history), and those turn ids in file order."""
    labelled = [t.turn_id for _, t in dataset.labelled_turns()]
    chosen = set(sorted(labelled, key=lambda tid: hashlib.sha256(tid.encode("utf-8")).hexdigest())[:size])
    conversations = tuple(dataclasses.replace(c, turns=tuple(
        t if t.turn_id in chosen else dataclasses.replace(t, expected_answers=(), answer_aliases=(),
                                                          relevant_doc_ids=None)
        for t in c.turns)) for c in dataset.conversations)
    out = dataclasses.replace(dataset, conversations=conversations)
    return out, [t.turn_id for _, t in out.labelled_turns()]


def llm_options(args: argparse.Namespace) -> dict[str, Any]:
    # a batch of long prompts at one thread on a busy machine outlasts the default 60 s timeout, and a retry would
    # only redo the same local work: one long attempt
    return {"provider": "transformers", "model": args.model, "cache": str(args.cache / "mtrag-rewriter.sqlite"),
            "provider_options": {"threads": 1}, "timeout": 1800, "retries": 0}


def rewriter_section(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The llm rewriter on a real model over the subset: rewrites (cached, in chunks), then one conversation run
    that replays them; returns what the docs quote."""
    dataset, turn_ids = subset(read_mtrag(root), args.rewrite_turns)
    requests = rewrite_requests(dataset.conversations)
    by_index: dict[int, int] = {}
    for _, turn in dataset.labelled_turns():
        by_index[turn.index] = by_index.get(turn.index, 0) + 1
    print(f"\n## llm rewriter ({args.model}, provider transformers, 1 thread) on {len(turn_ids)} turns of "
          f"{len({c.conversation_id for c, _ in dataset.labelled_turns()})} conversations (the first by SHA-256 of "
          f"the turn id); turns per turn index {dict(sorted(by_index.items()))}\nturn ids: {', '.join(turn_ids)}",
          flush=True)
    rewriter = LLMRewriter(**llm_options(args))
    texts: list[str | None] = []
    started = time.perf_counter()
    for start in range(0, len(requests), args.chunk):
        texts.extend(rewriter.batch_rewrite(requests[start:start + args.chunk]))
        got = rewriter.stats()
        print(f"  {len(texts)}/{len(requests)} rewritten: {got['calls']} model calls, {got['cache_hits']} cache "
              f"hits, {got['unmeasured']} None, {time.perf_counter() - started:.0f} s ({uptime()})", flush=True)
    elapsed = time.perf_counter() - started
    made = rewriter.stats()
    print(f"rewrites: {made['calls']} model calls ({made['output_tokens']} output tokens) in {elapsed:.0f} s"
          + (f" = {elapsed / made['calls']:.2f} s a call" if made["calls"] else "")
          + f"; {made['cache_hits']} from the cache; None {made['unmeasured']} ({made['errors']}); repairs "
          f"{made['repairs']}; unchanged {made['unchanged']}", flush=True)
    for request, text in list(zip(requests, texts, strict=True))[:args.show]:
        print(f"  {request.turn_id}: {request.message!r} -> {text!r}")

    corpus = EvaluationDataset(name=dataset.name, corpus={k: dict(v) for k, v in (dataset.corpus or {}).items()},
                               queries=[dataset.labelled_turns()[0][1].query("probe", "probe")])
    replay = LLMRewriter(**llm_options(args))
    evaluator = Evaluator(create_retriever("bm25", dataset=corpus), metrics=METRICS, k=10)
    run_started = time.perf_counter()
    results = ConversationEvaluator(evaluator, forms=["last_turn", "rewrite", "rewriter"], rewriter=replay,
                                    all_pairs=True, seed=args.seed).evaluate(dataset)
    replayed = results.stats["rewriter"]
    print(f"\nconversation run (BM25, one reduced corpus, 3 forms) in {time.perf_counter() - run_started:.1f} s; "
          f"its rewriter: {replayed['calls']} model calls, {replayed['cache_hits']} cache hits of "
          f"{replayed['structured_calls']} rewrites", flush=True)
    assert replayed["calls"] == 0, "the replay made model calls"
    print(f"\n| BM25, one reduced corpus, {len(turn_ids)} turns | " + " | ".join(
        f"{m} (95%, conversations resampled)" for m in METRICS) + " | turns |\n|---|---|---|---|")
    for form in results.forms:
        cells = [f"{results.scores[form][m]:.3f} [{results.intervals[form][m][0]:.3f}, "
                 f"{results.intervals[form][m][1]:.3f}]" for m in METRICS]
        name = f"rewriter `llm` ({args.model})" if form == "rewriter" else form
        print(f"| {name} | " + " | ".join(cells) + f" | {results.n[form]['turns']} |")
    print(f"\n| difference (paired over conversations, randomization, Holm over the {len(results.differences)}) | "
          "mean [95%] | p (Holm-adjusted) | turns / conversations |\n|---|---|---|---|")
    for d in results.differences:
        span, p, adjusted = d["interval"], d["p_value"], d["p_adjusted"]
        shown = "n/a" if p is None else f"{p:.2g} ({adjusted:.2g})"
        interval = "" if span is None else f" [{span[0]:+.3f}, {span[1]:+.3f}]"
        mean = "n/a" if d["mean"] is None else f"{d['mean']:+.3f}"
        print(f"| {d['metric']} {d['b']} - {d['a']} | {mean}{interval} | {shown} | {d['n_turns']} / "
              f"{d['n_conversations']} |")
    return {"model": args.model, "turn_ids": turn_ids, "rewrites": dict(zip(turn_ids, texts, strict=True)),
            "made": {k: v for k, v in made.items() if k != "injection"}, "seconds": elapsed,
            "replay": {k: v for k, v in replayed.items() if k != "injection"},
            "scores": results.scores, "intervals": results.intervals, "n": results.n,
            "differences": [{k: d[k] for k in ("a", "b", "metric", "mean", "interval", "p_value", "p_adjusted",
                                                "n_turns", "n_conversations")} for d in results.differences]}


def stub_section(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The llm rewriter's own cost per turn: every labelled turn against a zero-latency stub chat server (the
    message back as the query), uncached, then again through a fresh cache and its replay."""
    from evret_core.testing.llm_provider import stub_options
    from evret_core.testing.llm_stubs import StubLLMServer, StubRequest

    def echo(request: StubRequest) -> str:
        prompt = next(str(m["content"]) for m in request.body["messages"] if m["role"] == "user")
        message = prompt.rsplit("<message-", 1)[1].split(">\n", 1)[1].rsplit("\n</message-", 1)[0]
        return json.dumps({"query": message})

    requests = rewrite_requests(read_mtrag(root).conversations)
    out: dict[str, Any] = {"turns": len(requests)}
    with StubLLMServer(echo) as server:
        cache = args.cache / "mtrag-rewriter-stub.sqlite"
        cache.unlink(missing_ok=True)
        for label, cached in (("uncached", False), ("cache, first run", str(cache)), ("cache replay", str(cache))):
            times, cpu = [], []
            for _ in range(1 if cached else args.repeat):
                rewriter = LLMRewriter(**{**stub_options(server), "cache": cached})
                server.reset()
                started, started_cpu = time.perf_counter(), time.process_time()
                texts = rewriter.batch_rewrite(requests)
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            got = rewriter.stats()
            assert texts == [r.message for r in requests], "the stub echoes the message"
            seconds, cpu_seconds = float(np.median(times)), float(np.median(cpu))
            out[label] = {"seconds": seconds, "ms_per_turn": 1000 * seconds / len(requests),
                          "cpu_ms_per_turn": 1000 * cpu_seconds / len(requests),
                          "http_requests": len(server.requests), "calls": got["calls"],
                          "cache_hits": got["cache_hits"]}
            print(f"stub server, {label}: {len(requests)} turns in {seconds:.3f} s = "
                  f"{out[label]['ms_per_turn']:.2f} ms a turn (CPU of this process, the server's threads "
                  f"included: {out[label]['cpu_ms_per_turn']:.2f} ms); {len(server.requests)} HTTP requests, "
                  f"{got['cache_hits']} cache hits", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--json", type=Path, default=Path("/tmp/evret-bench/mtrag_retrieval.json"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rewriter", choices=["llm", "stub"], help="add the llm rewriter's section (see above)")
    parser.add_argument("--rewrite-turns", type=int, default=40)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("EVRET_BENCH_CACHE", "/tmp/evret-bench")))
    parser.add_argument("--chunk", type=int, default=8, help="rewrites per batch (each answer is cached)")
    parser.add_argument("--show", type=int, default=12, help="rewrites printed")
    parser.add_argument("--repeat", type=int, default=3, help="uncached stub runs (median)")
    args = parser.parse_args()
    root = args.shared / "datasets" / "mtrag" / "retrieval_tasks"
    extra = f" --rewriter {args.rewriter}" if args.rewriter else ""
    extra += f" --rewrite-turns {args.rewrite_turns} --model {args.model}" if args.rewriter == "llm" else ""
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}; command: nice -n 10 python benchmarks/mtrag_retrieval.py "
          f"--shared {args.shared}{extra}\n$ uptime\n{uptime()}", flush=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    pooled: dict[str, dict[str, dict[str, float]]] = {form: {} for form in FORMS}
    per_domain: dict[str, dict[str, float]] = {}
    facts: dict[str, dict[str, Any]] = {}
    conversation_of: dict[str, str] = {}
    for domain in DOMAINS:
        scores, facts[domain] = domain_scores(root / domain)
        conversation_of.update(facts[domain].pop("conversation_of"))
        per_domain[domain] = {form: float(np.mean([s["ndcg@10"] for s in scores[form].values()])) for form in FORMS}
        for form in FORMS:
            pooled[form].update(scores[form])
    turns = list(pooled["last_turn"])
    assert all(set(pooled[form]) == set(turns) for form in FORMS), "a form left a turn unmeasured"
    sizes = ", ".join(f"{d} {facts[d]['passages']}" for d in DOMAINS)
    print(f"\nReduced corpus: {sum(f['passages'] for f in facts.values()):,} passages ({sizes}); {len(turns)} "
          f"scored turns in "
          f"{len(set(conversation_of.values()))} conversations; BM25 index + 3 forms in "
          f"{sum(f['seconds'] for f in facts.values()):.2f} s")
    columns = {f"{form} {m}": [pooled[form][t][m] for t in turns] for form in FORMS for m in METRICS}
    intervals = bootstrap_intervals(columns, seed=args.seed)
    print("\n| BM25, reduced corpus | " + " | ".join(FORMS) + " |\n|---|" + "---|" * len(FORMS))
    for m in METRICS:
        cells = [f"{np.mean(columns[f'{f} {m}']):.3f} [{intervals[f'{f} {m}'][0]:.3f}, {intervals[f'{f} {m}'][1]:.3f}]"
                 for f in FORMS]
        print(f"| {m} (turn bootstrap 95%) | " + " | ".join(cells) + " |")
    rows: list[list[Any]] = []
    for m in METRICS:
        base = np.asarray(columns[f"last_turn {m}"])
        for form in FORMS[1:]:
            other = np.asarray(columns[f"{form} {m}"])
            diff = other - base
            low, high = bootstrap_interval(diff, seed=args.seed)
            rows.append([f"{m} {form} - last_turn", float(diff.mean()), low, high, paired_t_test(other, base),
                         paired_randomization_test(other, base, seed=args.seed)])
    adjusted = holm_bonferroni([r[5] for r in rows])
    print("\n| difference | mean | 95% interval (turns resampled) | p (paired t) | p (randomization) | "
          "p (randomization, Holm) |\n|---|---|---|---|---|---|")
    for row, holm in zip(rows, adjusted, strict=True):
        print(f"| {row[0]} | {row[1]:+.3f} | [{row[2]:+.3f}, {row[3]:+.3f}] | {row[4]:.2g} | {row[5]:.2g} | "
              f"{holm:.2g} |")
    print("\n| nDCG@10 by domain | " + " | ".join(FORMS) + " | turns |\n|---|" + "---|" * (len(FORMS) + 1))
    for domain in DOMAINS:
        print(f"| {domain} | " + " | ".join(f"{per_domain[domain][f]:.3f}" for f in FORMS)
              + f" | {facts[domain]['turns']} |")
    print(f"\nPublished reference point: {PUBLISHED}.")
    written: dict[str, Any] = {"facts": facts, "per_domain_ndcg@10": per_domain,
                               "means": {k: float(np.mean(v)) for k, v in columns.items()},
                               "intervals": intervals, "differences": rows, "holm": adjusted}
    if args.rewriter == "llm":
        written["llm_rewriter"] = rewriter_section(root, args)
    elif args.rewriter == "stub":
        written["stub_rewriter"] = stub_section(root, args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(written, indent=2))
    print(f"(written {args.json})\n$ uptime\n{uptime()}")


if __name__ == "__main__":
    main()
