"""Cost of a conversation run against single questions of the same size: MTRAG turns through ``evret evaluate``.

The data is benchmarks/mtrag_retrieval.py's: MTRAG's retrieval tasks over the REDUCED corpus (the 1,488 passages
the shared copy has text for), 238 labelled turns, the default query forms of an MTRAG run (last_turn,
full_history, rewrite). Two label kinds, each run both ways through ``evret evaluate`` with ``bm25`` (defaults):

- ids: the conversation run is ``--dataset <retrieval_tasks> --dataset-format mtrag`` (its qrels); the flat run is a
  BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) of the queries that conversation run retrieves;
- text: every labelled turn gets expected answer texts instead of ids (a 6-word span, words 10-15, of each of its
  judged passages), judged by ``contains``; the conversation run is a conversation JSONL with ``--corpus``, the flat
  run a queries JSONL of the same queries with ``--retriever-option corpus=``.

The flat datasets hold exactly the queries the conversation run retrieves (one per turn and distinct text, as
``ConversationEvaluator.plan_queries`` makes them: same ids, texts and labels), so the ratio of the two runs' times
is the ratio per retrieved query. A third run per label kind, flat-all, holds every (turn, form) text without the
dedup: its time against flat is what the dedup saves. Each run is a fresh ``evret evaluate`` process (wall time
and CPU time, user + system, of the child from ``os.wait4``); ``--repeat`` rounds alternate the order, medians
reported. ``--profile`` also runs each pair in this process after a warm run (imports out): the CPU seconds of each
stage (loading, building the retriever, the evaluator's retrieve/judge/metrics, the conversation run and its
statistics), and cProfile's functions whose own CPU time differs most between the two.

Usage: nice -n 10 python benchmarks/conversation_cost.py [--shared ../shared] [--repeat 3] [--cache DIR] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import csv
import dataclasses
import functools
import json
import os
import pstats
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evret_core.conversation.forms import HistoryWindow, default_forms, form_texts
from evret_core.conversation.turn_evaluator import ConversationEvaluator
from evret_core.io.conversations import ConversationSet
from evret_core.io.mtrag import read_mtrag

REPO = Path(__file__).resolve().parents[1]
METRICS = ["ndcg@10", "recall@10"]
SPAN = (10, 16)  # the words of a judged passage that become a text label


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def text_labelled(dataset: ConversationSet) -> ConversationSet:
    """``dataset`` with each labelled turn's ids replaced by expected answer texts: words 10-15 of each of its
    judged passages (sorted by id) that has that many words."""
    corpus = dataset.corpus or {}

    def spans(turn: Any) -> tuple[str, ...]:
        out = []
        for doc_id in sorted(turn.relevance):
            words = str(corpus[doc_id].get("text", "")).split()
            if len(words) >= SPAN[1]:
                out.append(" ".join(words[SPAN[0]:SPAN[1]]))
        return tuple(dict.fromkeys(out))

    conversations = []
    for conversation in dataset.conversations:
        turns = []
        for turn in conversation.turns:
            if turn.is_labelled:
                answers = spans(turn)
                turn = dataclasses.replace(turn, relevant_doc_ids=None, expected_answers=answers,
                                           answer_aliases=tuple((a,) for a in answers))
            turns.append(turn)
        conversations.append(dataclasses.replace(conversation, turns=tuple(turns)))
    return dataclasses.replace(dataset, conversations=tuple(conversations))


def planned(dataset: ConversationSet, forms: list[str]) -> tuple[list[Any], list[Any]]:
    """The queries a conversation run retrieves (deduplicated per turn, its ids) and every (turn, form) text as a
    query of its own (ids ``turn_id|form``)."""
    planner = ConversationEvaluator.__new__(ConversationEvaluator)  # plan_queries needs only forms and window
    planner.forms, planner.window = forms, HistoryWindow()
    inner, _ = planner.plan_queries(dataset, None)
    texts = form_texts(dataset.conversations, forms, HistoryWindow())
    every = [turn.query(f"{turn.turn_id}|{form}", text) for _, turn in dataset.labelled_turns() for form in forms
             if (text := texts[form][turn.turn_id]) is not None and text.strip()]
    return list(inner.queries), every


def write_corpus(path: Path, corpus: Any) -> None:
    with path.open("w", encoding="utf-8") as out:
        for doc_id, record in corpus.items():
            out.write(json.dumps({"_id": doc_id, "title": record.get("title", ""), "text": record.get("text", "")})
                      + "\n")


def write_beir(folder: Path, corpus: Any, queries: list[Any]) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    write_corpus(folder / "corpus.jsonl", corpus)
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for q in queries:
            out.write(json.dumps({"_id": q.query_id, "text": q.query_text}) + "\n")
    with (folder / "qrels" / "test.tsv").open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, delimiter="\t", lineterminator="\n")
        writer.writerow(["query-id", "corpus-id", "score"])
        for q in queries:
            for doc_id, grade in q.relevant_doc_ids.items():
                writer.writerow([q.query_id, doc_id, int(grade)])


def write_text_queries(path: Path, queries: list[Any]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for q in queries:
            out.write(json.dumps({"query_id": q.query_id, "query": q.query_text,
                                  "expected_answers": [list(a) for a in q.answer_aliases]}) + "\n")


def prepare(shared: Path, work: Path) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Write the datasets; return run name -> ``evret evaluate`` arguments, and the counts."""
    root = shared / "datasets" / "mtrag" / "retrieval_tasks"
    dataset = read_mtrag(root)
    forms = default_forms(False, sum(t.rewrite is not None for _, t in dataset.labelled_turns()))
    work.mkdir(parents=True, exist_ok=True)
    ids_queries, ids_every = planned(dataset, forms)
    write_beir(work / "flat-ids", dataset.corpus, ids_queries)
    write_beir(work / "flat-all-ids", dataset.corpus, ids_every)
    texts = text_labelled(dataset)
    text_queries, text_every = planned(texts, forms)
    assert [q.query_text for q in text_queries] == [q.query_text for q in ids_queries]
    write_corpus(work / "corpus.jsonl", dataset.corpus)
    texts.to_jsonl(work / "conversations-text.jsonl")
    write_text_queries(work / "flat-text.jsonl", text_queries)
    write_text_queries(work / "flat-all-text.jsonl", text_every)
    common = ["--retriever", "bm25", *[a for m in METRICS for a in ("--metric", m)], "--no-progress"]
    corpus = str(work / "corpus.jsonl")
    runs = {
        "conversation ids": ["--dataset", str(root), "--dataset-format", "mtrag", *common],
        "flat ids": ["--dataset", str(work / "flat-ids"), *common],
        "flat-all ids": ["--dataset", str(work / "flat-all-ids"), *common],
        "conversation text": ["--dataset", str(work / "conversations-text.jsonl"), "--corpus", corpus,
                              "--judge", "contains", *common],
        "flat text": ["--dataset", str(work / "flat-text.jsonl"), "--retriever-option", f"corpus={corpus}",
                      "--judge", "contains", *common],
        "flat-all text": ["--dataset", str(work / "flat-all-text.jsonl"), "--retriever-option",
                          f"corpus={corpus}", "--judge", "contains", *common],
    }
    facts = {"forms": forms, "labelled_turns": len(dataset.labelled_turns()),
             "conversations": len({c.conversation_id for c, _ in dataset.labelled_turns()}),
             "passages": len(dataset.corpus or {}), "queries": len(ids_queries), "texts": len(ids_every),
             "text_labels": sum(len(q.expected_answers) for q in text_queries)}
    return runs, facts


def run_once(name: str, args: list[str], out: Path) -> dict[str, float]:
    """One ``evret evaluate`` process: wall and CPU seconds, the wall seconds its results file records (the whole
    run in the process, and its evaluator), the queries it retrieved and the contexts it judged."""
    output = out / f"{name.replace(' ', '-')}.json"
    output.unlink(missing_ok=True)
    log = out / f"{name.replace(' ', '-')}.stderr"
    with log.open("wb") as stderr:  # a file, not a pipe: nothing blocks while the child runs
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "evret_core.cli", "evaluate", *args, "--output",
                                  str(output)], stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{name}: exit {child.returncode}\n{log.read_text()}")
    results = json.loads(output.read_text())
    stats = results["stats"]
    inner = stats.get("evaluation", stats)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "in_process": float(stats["elapsed_s"]), "evaluation": float(inner["elapsed_s"]),
            "queries": float(inner["num_queries"]),
            "judged": float(inner.get("judgments", {}).get("unique", 0))}


STAGES = {  # what a run spends its CPU on: (class, method) timed in-process
    "load": [("evret_core.evaluation.config:EvaluateConfig", "load_dataset"),
             ("evret_core.conversation.turn_config:ConversationConfig", "load_dataset")],
    "build": [("evret_core.evaluation.config:EvaluateConfig", "build_evaluator")],
    "retrieve, judge, metrics": [("evret_core.evaluation.evaluator:Evaluator", "evaluate")],
    "conversation run": [("evret_core.conversation.turn_evaluator:ConversationEvaluator", "evaluate")],
    "of which statistics": [],  # conversation/aggregates.aggregate, as turn_evaluator calls it
}


@contextlib.contextmanager
def stage_clock(spent: dict[str, float]) -> Iterator[None]:
    """CPU seconds (``time.process_time``) spent in each of :data:`STAGES` while the block runs, added to
    ``spent``; the methods are wrapped for the block only (a method that calls itself is counted once)."""
    import importlib

    from evret_core.conversation import turn_evaluator

    saved: list[tuple[Any, str, Any]] = []
    active: set[str] = set()

    def wrap(stage: str, original: Any) -> Any:
        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if stage in active:
                return original(*args, **kwargs)
            active.add(stage)
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[stage] = spent.get(stage, 0.0) + time.process_time() - started
                active.discard(stage)
        return timed

    # the statistics are one module-level call inside ConversationEvaluator.evaluate
    saved.append((turn_evaluator, "aggregate", turn_evaluator.aggregate))
    turn_evaluator.aggregate = wrap("of which statistics", turn_evaluator.aggregate)  # type: ignore[assignment]
    for stage, targets in STAGES.items():
        for target, method in targets:
            module, _, name = target.partition(":")
            owner = getattr(importlib.import_module(module), name)
            saved.append((owner, method, owner.__dict__[method]))
            setattr(owner, method, wrap(stage, owner.__dict__[method]))
    try:
        yield
    finally:
        for owner, method, original in reversed(saved):
            setattr(owner, method, original)


def in_process(args: list[str], profiler: cProfile.Profile | None = None) -> tuple[float, dict[str, float]]:
    """One ``evret evaluate`` in this process (output to /dev/null): CPU seconds in all, and per stage."""
    from evret_core.cli import main as cli

    spent: dict[str, float] = {}
    clock = contextlib.nullcontext() if profiler else stage_clock(spent)  # the profile shows no wrappers
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), clock:
        started = time.process_time()
        status = profiler.runcall(cli, ["evaluate", *args]) if profiler else cli(["evaluate", *args])
        spent["all"] = time.process_time() - started
    if status != 0:
        raise SystemExit(f"evret evaluate {shlex.join(args)}: exit {status}")
    return spent["all"], spent


def profile(runs: dict[str, list[str]], repeat: int, top: int) -> dict[str, Any]:
    """Both runs of each label kind in this process (after one warm run each, so imports are out): the CPU
    seconds of each stage (median of ``repeat``), then cProfile's functions whose cumulative time differs most."""
    out: dict[str, Any] = {}
    for label in ("ids", "text"):
        names = [f"conversation {label}", f"flat {label}"]
        for name in names:
            in_process(runs[name])
        spent: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for round_ in range(repeat):
            for name in (names if round_ % 2 == 0 else names[::-1]):
                spent[name].append(in_process(runs[name])[1])
        median = {name: {stage: statistics.median(r.get(stage, 0.0) for r in rows)
                         for stage in ["all", *STAGES]} for name, rows in spent.items()}
        conv, flat = (median[n] for n in names)
        print(f"\nCPU seconds per stage, {label} labels, in-process after a warm run (median of {repeat}):\n"
              f"| stage | conversation | flat | difference |\n|---|---|---|---|")
        for stage in ["all", *STAGES]:
            print(f"| {stage} | {conv[stage]:.3f} | {flat[stage]:.3f} | {conv[stage] - flat[stage]:+.3f} |")
        own: dict[str, dict[str, float]] = {}
        for name in names:
            prof = cProfile.Profile(time.process_time)  # CPU: the wall clock counts the other processes
            in_process(runs[name], prof)
            table = pstats.Stats(prof).stats  # type: ignore[attr-defined]
            own[name] = {}
            for (file, line, func), (_, _, tt, _, _) in table.items():
                where = f"{Path(file).parent.name}/{Path(file).name}:{line}({func})"
                own[name][where] = own[name].get(where, 0.0) + tt
        c, f = (own[n] for n in names)
        extra = sorted(((c[k] - f.get(k, 0.0), k) for k in c), reverse=True)[:top]
        print(f"\ncProfile, {label} labels (profiled, so inflated): own seconds (tottime), conversation / flat, the "
              f"largest differences; in all {sum(c.values()):.2f} / {sum(f.values()):.2f}")
        for diff, where in extra:
            print(f"  {c[where]:7.3f} {f.get(where, 0.0):7.3f}  {diff:+.3f}  {where}")
        out[label] = {"stages": median, "largest": [[where, c[where], f.get(where, 0.0)] for _, where in extra]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("EVRET_BENCH_CACHE", "/tmp/evret-bench")))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also profile both runs in-process")
    parser.add_argument("--top", type=int, default=15, help="profile rows printed")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}; command: nice -n 10 python benchmarks/conversation_cost.py "
          f"--shared {args.shared} --repeat {args.repeat}{' --profile' if args.profile else ''}\n$ uptime\n"
          f"{uptime()}", flush=True)
    work = args.cache / "conversation-cost"
    runs, facts = prepare(args.shared, work)
    print(f"{facts['labelled_turns']} labelled turns in {facts['conversations']} conversations, forms "
          f"{', '.join(facts['forms'])}: {facts['texts']} (turn, form) texts, {facts['queries']} distinct per turn "
          f"(retrieved); {facts['passages']:,} passages; text labels: {facts['text_labels']} expected answers")
    for name, argv in runs.items():
        print(f"  {name}: evret evaluate {shlex.join(argv)}")
    times: dict[str, list[dict[str, float]]] = {name: [] for name in runs}
    for round_ in range(args.repeat):
        for label in ("ids", "text"):
            names = [f"conversation {label}", f"flat {label}", f"flat-all {label}"]
            for name in (names if round_ % 2 == 0 else names[::-1]):
                times[name].append(run_once(name, runs[name], work))
        print(f"  round {round_ + 1}/{args.repeat} done ({uptime()})", flush=True)
    median = {name: {key: statistics.median(t[key] for t in got) for key in got[0]} for name, got in times.items()}
    for label in ("ids", "text"):  # the flat run is the same work as single questions
        assert median[f"conversation {label}"]["queries"] == median[f"flat {label}"]["queries"] == facts["queries"]
        assert median[f"conversation {label}"]["judged"] == median[f"flat {label}"]["judged"]
    print(f"\n| run (median of {args.repeat}) | retrieved queries | contexts judged | wall s | CPU s | labelled turns "
          "per CPU second |\n|---|---|---|---|---|---|")
    for name, m in median.items():
        print(f"| {name} | {m['queries']:.0f} | {m['judged']:.0f} | {m['wall']:.2f} | {m['cpu']:.2f} | "
              f"{facts['labelled_turns'] / m['cpu']:.0f} |")
    profiled = profile(runs, args.repeat, args.top) if args.profile else None
    ratios: dict[str, dict[str, float]] = {}
    print("\n| per retrieved query, conversation / flat | process wall | process CPU | in-process CPU, warm | "
          "its retrieve, judge, metrics stage | dedup: flat-all / flat (wall, CPU) |\n|---|---|---|---|---|---|")
    for label in ("ids", "text"):
        conv, flat, every = (median[f"{k} {label}"] for k in ("conversation", "flat", "flat-all"))
        per = {key: (conv[key] / conv["queries"]) / (flat[key] / flat["queries"]) for key in ("wall", "cpu")}
        per["dedup_wall"] = every["wall"] / flat["wall"]
        per["dedup_cpu"] = every["cpu"] / flat["cpu"]
        warm = ["n/a (--profile)", "n/a (--profile)"]
        if profiled is not None:  # the same queries on both sides: the ratio of times is the ratio per query
            stages = profiled[label]["stages"]
            c, f = stages[f"conversation {label}"], stages[f"flat {label}"]
            per["warm_cpu"] = c["all"] / f["all"]
            per["warm_stage"] = c["retrieve, judge, metrics"] / f["retrieve, judge, metrics"]
            warm = [f"{per['warm_cpu']:.2f}x", f"{per['warm_stage']:.2f}x"]
        ratios[label] = per
        print(f"| {label} labels | {per['wall']:.2f}x | {per['cpu']:.2f}x | {warm[0]} | {warm[1]} | "
              f"{per['dedup_wall']:.2f}x, {per['dedup_cpu']:.2f}x |")
    print(f"\ntarget: no worse than 1.2x per retrieved query; dedup: {facts['texts'] - facts['queries']} of "
          f"{facts['texts']} (turn, form) texts are retrieved once with another form's")
    out = args.cache / "conversation_cost.json"
    out.write_text(json.dumps({"facts": facts, "runs": runs, "times": times, "median": median, "ratios": ratios,
                               "profile": profiled}, indent=2))
    print(f"(written {out})\n$ uptime\n{uptime()}")


if __name__ == "__main__":
    main()
