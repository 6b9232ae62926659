"""MTRAG's human faithfulness ratings against Evret's claim judges: Spearman's rho of per-response groundedness and
faithfulness with the mean of the raters' faithfulness (1-4), with the authors' own metrics recomputed beside.

Data: ``evaluations/reference_subset_with_human_evaluations.json`` of the shared MTRAG copy (477 responses of 3
systems, gpt-4o, llama-3.1-405b-instruct and the reference answers, to 159 tasks of 20 conversations, each rated by
2-3 people). The responses come from ``mtrag_responses``, the tasks (question, earlier messages, reference passages)
from ``read_mtrag``. Per response: ``claim_task(question, Answer(text), contexts)``, the harness's own: the claims
are the response's sentences (``claims_of``), the contexts the task's reference passages (title + text, as the
harness builds them), and ``history`` the task's earlier messages under one of three evidence settings: ``none``
(passages only), ``user`` (+ the user's earlier messages) or ``all`` (+ every earlier user and agent message). The
verdicts go through ``claim_scores``: **groundedness** (supported claims / claims, graded) and **faithfulness** (1
when every claim is supported, else 0: binary). The claim judges read ``ClaimTask.history`` only where the library
does; this script always passes it.

Judges: the lexical claim judge over ``token-overlap`` (defaults), ``contains`` and ``semantic`` (the packaged
MiniLM; its encodes cached in SQLite under ``--cache``), and the ``llm`` claim judge on SmolLM2-135M-Instruct
through evret-transformers (one torch thread; answers cached in SQLite under ``--cache``: a stopped run resumes) on
a stratified sample of ``--llm-tasks`` tasks with passages x their 3 responses (tasks sorted by the mean human
faithfulness of their responses, cut into equal strata, one task drawn per stratum, seed 0). The LLM verifies the
same sentence claims (``extract`` off), so every judge scores the same claims.

Intervals: 95% percentile bootstrap of rho, 1,000 resamples (seed 0), once over responses and once over
conversations (clustered: a drawn conversation brings all its responses). Figures for all responses, for the
responses whose task has passages (27 responses of 9 tasks have none: every claim is unsupported) and per system;
n beside every figure (a response without claims has no score and is left out).

Usage: nice -n 10 python benchmarks/mtrag_faithfulness.py [--shared ../shared] [--cache /tmp/evret-bench]
       [--json /tmp/evret-bench/mtrag_faithfulness.json] [--parts offline,semantic,llm] [--llm-tasks 10]
Prints Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.contracts.claims import ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Turn
from evret_core.contracts.generation import Answer, Context
from evret_core.io.mtrag import mtrag_responses, read_mtrag
from evret_core.rag.claims.claim_judges import LexicalClaimJudge, claim_scores, claim_task
from evret_core.rag.questions.question_sets import QuestionSet

REPO = Path(__file__).resolve().parents[1]
EVAL_FILE = Path("datasets/mtrag/evaluations/reference_subset_with_human_evaluations.json")
SYSTEMS = ("gpt-4o", "llama-3.1-405b-instruct", "reference")
SETTINGS = ("none", "user", "all")
SETTING_NAMES = {"none": "passages", "user": "passages + user turns", "all": "passages + whole history"}
SCORES = ("groundedness", "faithfulness")
AUTHORS = ("Bert-KPrec", "RougeL", "Bert-Rec", "rl_f", "rb_llm", "rb_agg")
PUBLISHED = {"Bert-KPrec": 0.58, "RougeL": 0.40, "rb_llm": 0.33}
TARGET = 0.33  # the authors' LLM judge (rb_llm); the issue's target for an offline judge
RESAMPLES = 1000
# one call at a time with a long timeout: a ~1,700-token prompt takes about a minute at one thread on a loaded
# machine, past the default 60 s, and a batch of them several minutes
LLM_OPTIONS: dict[str, Any] = {"provider": "transformers", "model": "smollm2-135m",
                               "provider_options": {"threads": 1}, "max_concurrency": 1, "timeout": 1200}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


@dataclass(frozen=True)
class Response:
    """One rated response with what its claim task needs."""

    task_id: str
    conversation: str
    system: str
    human: float  # mean of the raters' faithfulness
    authors: dict[str, float]
    task: ClaimTask  # history empty; see with_history()
    history: dict[str, tuple[Turn, ...]]

    def with_history(self, setting: str) -> ClaimTask:
        return replace(self.task, history=self.history[setting])


def load(path: Path) -> list[Response]:
    """The 477 rated responses with their claim tasks, in file order."""
    conversations = read_mtrag(path)
    corpus = QuestionSet(questions=[], corpus={k: dict(v) for k, v in (conversations.corpus or {}).items()})
    turns = {}
    for conversation in conversations.conversations:
        for i, turn in enumerate(conversation.turns):
            earlier = conversation.turns[:i]
            user = tuple(Turn("user", t.user) for t in earlier)
            everything = tuple(m for t in earlier for m in (Turn("user", t.user),
                                                             *((Turn("agent", t.agent),) if t.agent else ())))
            turns[turn.turn_id] = (conversation.conversation_id, turn, {"none": (), "user": user, "all": everything})
    out = []
    for system, records in mtrag_responses(path).items():
        for record in records:
            conversation_id, turn, history = turns[record["question_id"]]
            ids = turn.relevant_doc_ids or ()
            contexts = [Context(doc_id, text) for doc_id in ids if (text := corpus.text_of(str(doc_id))) is not None]
            ratings = record["metadata"]["human"]["faithfulness"]
            authors = {m: _number(record["metadata"]["authors"].get(m)) for m in AUTHORS}
            task = claim_task(turn.user, Answer(text=record["text"]), contexts)
            out.append(Response(record["question_id"], conversation_id, system, float(np.mean(ratings)), authors,
                                task, history))
    return out


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


# -- Spearman with its intervals -----------------------------------------------------------------------------------


def _rho_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair of ``x`` and ``y`` (2-D, ranks with ties averaged); NaN for a constant row."""
    from scipy.stats import rankdata

    rx = rankdata(x, axis=1)
    ry = rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denominator = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, (rx * ry).sum(axis=1) / np.where(denominator > 0, denominator, 1), np.nan)


def spearman(scores: Sequence[float], human: Sequence[float], clusters: Sequence[str], seed: int = 0
             ) -> dict[str, Any]:
    """rho of ``scores`` with ``human`` over the pairs where the score is a number, with 95% percentile bootstrap
    intervals over responses and over clusters (conversations); n and the number of conversations."""
    keep = [i for i, s in enumerate(scores) if not math.isnan(s)]
    x = np.array([scores[i] for i in keep], dtype=float)
    y = np.array([human[i] for i in keep], dtype=float)
    groups = [clusters[i] for i in keep]
    n = len(keep)
    if n < 3:
        return {"n": n, "conversations": len(set(groups)), "rho": math.nan, "responses_ci": [math.nan, math.nan],
                "conversations_ci": [math.nan, math.nan]}
    rho = float(_rho_rows(x[None, :], y[None, :])[0])
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(RESAMPLES, n))
    flat = _interval(_rho_rows(x[idx], y[idx]))
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    blocks = [np.array(v) for v in members.values()]
    rng = np.random.default_rng(seed)
    clustered = []
    for _ in range(RESAMPLES):
        drawn = np.concatenate([blocks[j] for j in rng.integers(0, len(blocks), size=len(blocks))])
        clustered.append(_rho_rows(x[drawn][None, :], y[drawn][None, :])[0])
    return {"n": n, "conversations": len(blocks), "rho": rho, "responses_ci": flat,
            "conversations_ci": _interval(np.array(clustered))}


def _interval(values: np.ndarray) -> list[float]:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return [math.nan, math.nan]
    return [float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))]


# -- judging -------------------------------------------------------------------------------------------------------


def judged(judge: Any, tasks: list[ClaimTask]) -> tuple[list[dict[str, float]], list[list[ClaimVerdict]], float]:
    """Per-task claim scores, the verdicts and the seconds taken."""
    started = time.perf_counter()
    verdicts = judge.judge_claims(tasks)
    elapsed = time.perf_counter() - started
    return [claim_scores(v) for v in verdicts], verdicts, elapsed


def subsets(responses: list[Response], chosen: list[int] | None = None) -> dict[str, list[int]]:
    """Named index lists: all responses, those whose task has passages, and per system (with passages)."""
    every = list(range(len(responses))) if chosen is None else chosen
    with_passages = [i for i in every if responses[i].task.contexts]
    out = {"all": every, "with passages": with_passages}
    for system in SYSTEMS:
        out[system] = [i for i in with_passages if responses[i].system == system]
    return out


def correlations(values: Sequence[float], responses: list[Response], groups: dict[str, list[int]]
                 ) -> dict[str, dict[str, Any]]:
    return {name: spearman([values[i] for i in idx], [responses[i].human for i in idx],
                           [responses[i].conversation for i in idx]) for name, idx in groups.items()}


def stratified_tasks(responses: list[Response], count: int, seed: int) -> list[str]:
    """``count`` tasks with passages, one drawn from each of ``count`` equal strata of the tasks sorted by the mean
    human faithfulness of their responses."""
    by_task: dict[str, list[float]] = {}
    for r in responses:
        if r.task.contexts:
            by_task.setdefault(r.task_id, []).append(r.human)
    ordered = sorted(by_task, key=lambda t: (float(np.mean(by_task[t])), t))
    rng = np.random.default_rng(seed)
    drawn = [str(stratum[rng.integers(0, len(stratum))]) for stratum in np.array_split(np.array(ordered), count)
             if len(stratum)]
    # judged in a seeded order of the strata, so that a run stopped early still spans the range of ratings
    return [drawn[i] for i in rng.permutation(len(drawn))]


def run_llm(responses: list[Response], cache: Path, count: int, seed: int, replay: bool) -> dict[str, Any]:
    """The ``llm`` claim judge (SmolLM2) on the stratified sample, one task (its 3 responses) per call, printing
    its progress; answers are cached, so a rerun replays them. ``replay``: judge only the responses whose every
    call is in the cache (a partial run's figures without new model calls)."""
    from evret_core.plugins.registry import create_claim_judge

    tasks = stratified_tasks(responses, count, seed)
    judge: Any = create_claim_judge("llm", **LLM_OPTIONS, cache=str(cache / "mtrag-faithfulness-llm.sqlite"))
    chosen = [i for t in tasks for i, r in enumerate(responses) if r.task_id == t]
    scores: dict[int, dict[str, float]] = {}
    unmeasured = claims = 0
    counts: dict[str, int] = {}
    done: list[str] = []
    started = time.perf_counter()
    for n, task_id in enumerate(tasks, start=1):
        idx = [i for i in chosen if responses[i].task_id == task_id]
        # the same sentence claims as the offline judges: no extraction call
        if replay:
            cached = [i for i in idx if not judge.plan([replace(responses[i].task, extract=False)])["calls"]]
            if len(cached) < len(idx):
                print(f"  llm: task {n}/{len(tasks)}: {len(idx) - len(cached)} of its {len(idx)} responses not all "
                      "cached: left out (--llm-replay)", flush=True)
            idx = cached
            if not idx:
                continue
        got, verdicts, _ = judged(judge, [replace(responses[i].task, extract=False) for i in idx])
        done.append(task_id)
        for i, s, v in zip(idx, got, verdicts, strict=True):
            scores[i] = s
            claims += len(v)
            unmeasured += sum(x.verdict == "unmeasured" for x in v)
            for x in v:
                counts[x.verdict] = counts.get(x.verdict, 0) + 1
        stats = judge.stats()
        print(f"  llm: {n}/{len(tasks)} tasks, {claims} claims ({unmeasured} unmeasured), "
              f"{stats.get('calls', 0)} model calls, {stats['cache_hits']} cache hits, "
              f"{time.perf_counter() - started:.0f} s ({uptime()}); errors {stats['errors']} "
              f"{stats['error_examples']}", flush=True)
    elapsed = time.perf_counter() - started
    stats = judge.stats()
    return {"tasks": tasks, "judged_tasks": done, "responses": [i for i in chosen if i in scores], "scores": scores,
            "claims": claims, "unmeasured": unmeasured, "verdicts": counts,
            "seconds": elapsed, "model_calls": stats.get("calls", 0), "cache_hits": stats["cache_hits"],
            "input_tokens": stats.get("input_tokens", 0), "output_tokens": stats.get("output_tokens", 0),
            "errors": stats["errors"], "unmeasured_by_reason": stats["unmeasured"]}


# -- output --------------------------------------------------------------------------------------------------------


def cell(row: dict[str, Any], key: str = "responses_ci") -> str:
    if math.isnan(row["rho"]):
        return f"- (n {row['n']})"
    low, high = row[key]
    return f"{row['rho']:.3f} [{low:.3f}, {high:.3f}]"


def both(row: dict[str, Any]) -> str:
    return f"{cell(row)} / [{row['conversations_ci'][0]:.3f}, {row['conversations_ci'][1]:.3f}] (n {row['n']})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("EVRET_BENCH_CACHE", "/tmp/evret-bench")))
    parser.add_argument("--json", type=Path, default=None,
                        help="where to write the figures (default CACHE/mtrag_faithfulness.json)")
    parser.add_argument("--parts", default="offline,semantic,llm",
                        help="comma-separated: offline (authors' metrics, token-overlap, contains), semantic, llm")
    parser.add_argument("--llm-tasks", type=int, default=10, help="tasks in the LLM sample (3 responses each)")
    parser.add_argument("--llm-replay", action="store_true",
                        help="judge only the sampled responses whose LLM answers are all cached (no model calls)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"offline", "semantic", "llm"}
    if unknown:
        parser.error(f"--parts: unknown part(s) {', '.join(sorted(unknown))}; known: offline, semantic, llm")
    path = args.shared / EVAL_FILE
    if not path.is_file():
        parser.error(f"--shared: {path} is not a file")
    args.cache.mkdir(parents=True, exist_ok=True)
    out_path = args.json or args.cache / "mtrag_faithfulness.json"
    print(f"$ {shlex.join([sys.executable, *sys.argv])}\n$ uptime\n{uptime()}", flush=True)

    responses = load(path)
    groups = subsets(responses)
    claims = sum(len(r.task.claims) for r in responses)
    print(f"{len(responses)} responses to {len({r.task_id for r in responses})} tasks of "
          f"{len({r.conversation for r in responses})} conversations; {claims} sentence claims "
          f"({claims / len(responses):.2f} a response); {len(groups['all']) - len(groups['with passages'])} "
          "responses without passages", flush=True)
    report: dict[str, Any] = {"command": shlex.join(["python", "benchmarks/mtrag_faithfulness.py", *sys.argv[1:]]),
                              "uptime_start": uptime(), "responses": len(responses), "claims": claims,
                              "resamples": RESAMPLES, "seed": args.seed, "target": TARGET, "published": PUBLISHED,
                              "human_mean": float(np.mean([r.human for r in responses])),
                              "human_mean_by_system": {system: float(np.mean([r.human for r in responses
                                                                              if r.system == system]))
                                                       for system in SYSTEMS},
                              "authors": {}, "judges": {}, "llm": None}
    judges: list[tuple[str, Any]] = []
    if "offline" in parts:
        for metric in AUTHORS:
            report["authors"][metric] = correlations([r.authors[metric] for r in responses], responses, groups)
        judges += [("token-overlap", lambda: LexicalClaimJudge("token-overlap")),
                   ("contains", lambda: LexicalClaimJudge("contains"))]
    if "semantic" in parts:
        judges.append(("semantic", lambda: LexicalClaimJudge(
            "semantic", device="cpu", cache=str(args.cache / "mtrag-faithfulness-minilm.sqlite"))))
    if "semantic" in parts or "llm" in parts:
        import torch

        torch.set_num_threads(1)  # the 2 shared cores; the transformers provider asks for 1 thread too
    for name, make in judges:
        judge = make()
        report["judges"][name] = {}
        for setting in SETTINGS:
            scores, _, elapsed = judged(judge, [r.with_history(setting) for r in responses])
            report["judges"][name][setting] = {
                "seconds": elapsed, "faithful": sum(s["faithfulness"] == 1.0 for s in scores),
                **{score: correlations([s[score] for s in scores], responses, groups) for score in SCORES}}
            print(f"  {name} / {SETTING_NAMES[setting]}: {elapsed:.1f} s; "
                  f"{report['judges'][name][setting]['faithful']} of {len(responses)} responses faithful", flush=True)
    if "llm" in parts:
        llm = run_llm(responses, args.cache, args.llm_tasks, args.seed, args.llm_replay)
        sample = llm["responses"]
        values = {score: [llm["scores"][i][score] if i in llm["scores"] else math.nan for i in range(len(responses))]
                  for score in SCORES}
        rows = {score: correlations(values[score], responses, {"sample": sample}) for score in SCORES}
        peers: dict[str, Any] = {}
        for name, make in judges:  # the offline judges on the same sample (passages only)
            scores, _, _ = judged(make(), [responses[i].task for i in sample])
            full = [math.nan] * len(responses)
            grounded = list(full)
            for i, s in zip(sample, scores, strict=True):
                grounded[i] = s["groundedness"]
            peers[name] = correlations(grounded, responses, {"sample": sample})["sample"]
        peers["rb_llm"] = correlations([r.authors["rb_llm"] for r in responses], responses, {"sample": sample})["sample"]
        report["llm"] = {**{k: v for k, v in llm.items() if k != "scores"}, "options": LLM_OPTIONS,
                         **{score: rows[score]["sample"] for score in SCORES}, "peers_groundedness": peers}
    report["uptime_end"] = uptime()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=1, allow_nan=True) + "\n", encoding="utf-8")
    print_tables(report)
    print(f"\nwrote {out_path}\n$ uptime\n{report['uptime_end']}")


def print_tables(report: dict[str, Any]) -> None:
    """The Markdown tables docs/benchmarks.md quotes."""
    print(f"\nmean human faithfulness (1-4): {report['human_mean']:.2f} over all responses; "
          + ", ".join(f"{s} {m:.2f}" for s, m in report["human_mean_by_system"].items()))
    print("\nSpearman rho with the mean human faithfulness [95% bootstrap over responses] / [over conversations] (n)\n")
    if report["authors"]:
        print("| authors' metric | published | all responses | with passages |\n|---|---|---|---|")
        for metric, rows in report["authors"].items():
            print(f"| {metric} | {PUBLISHED.get(metric, '-')} | {both(rows['all'])} | {both(rows['with passages'])} |")
    if report["judges"]:
        print("\n| claim judge | evidence | score | all responses | with passages | seconds |\n|---|---|---|---|---|---|")
        for name, by_setting in report["judges"].items():
            for setting, row in by_setting.items():
                for score in SCORES:
                    print(f"| {name} | {SETTING_NAMES[setting]} | {score} | {both(row[score]['all'])} | "
                          f"{both(row[score]['with passages'])} | {row['seconds']:.1f} |")
        print("\nper system (responses with passages, evidence = passages)\n")
        print("| score | " + " | ".join(SYSTEMS) + " |\n|---|" + "---|" * len(SYSTEMS))
        for metric, rows in report["authors"].items():
            print(f"| {metric} (authors) | " + " | ".join(both(rows[s]) for s in SYSTEMS) + " |")
        for name, by_setting in report["judges"].items():
            for score in SCORES:
                rows = by_setting["none"][score]
                print(f"| {name} {score} | " + " | ".join(both(rows[s]) for s in SYSTEMS) + " |")
    llm = report.get("llm")
    if llm:
        print(f"\nllm claim judge (SmolLM2-135M, 1 thread): {len(llm['responses'])} responses of "
              f"{len(llm['judged_tasks'])} of the {len(llm['tasks'])} sampled tasks (3 responses each): "
              f"{llm['claims']} claims ({llm['verdicts']}), {llm['unmeasured']} unmeasured, {llm['model_calls']} model calls "
              f"({llm['cache_hits']} cache hits) in {llm['seconds']:.0f} s\n")
        print("| judge on the sample | score | rho [responses] / [conversations] (n) |\n|---|---|---|")
        for score in SCORES:
            print(f"| llm (SmolLM2) | {score} | {both(llm[score])} |")
        for name, row in llm["peers_groundedness"].items():
            print(f"| {name} | {'groundedness' if name != 'rb_llm' else 'authors'} | {both(row)} |")
    best: tuple[float, str, str, str] | None = None
    for name, by_setting in report["judges"].items():
        for setting, row in by_setting.items():
            for score in SCORES:
                low = row[score]["all"]["responses_ci"][0]
                if best is None or low > best[0]:  # the first of equal ones: passages before history settings
                    best = (low, name, setting, score)
    if best is not None:
        low, name, setting, score = best
        print(f"\ntarget (>= {TARGET} with an offline judge, all responses): the best lower bound is {low:.3f} "
              f"({name}, {SETTING_NAMES[setting]}, {score}): {'met' if low >= TARGET else 'not met'} at the lower bound")


if __name__ == "__main__":
    main()
