"""Benchmark: the ``ray`` executor (evret-ray) against the in-process ``local`` executor and the ideal, in one run
(issue 17). Ray runs as a local cluster on this machine (``--cpus``, default 2).

- ``llm``: LLM judging of N distinct contexts against the stub server answering after 200 ms, with a cluster-wide
  limit of 40 requests in flight and 4 judging workers (0 CPUs each: they wait on the network). The ideal time is
  ceil(N / 40) x 0.2 s; the stub counts the requests in flight and reports the most it saw. The in-process
  executor with ``max_concurrency=40`` is measured as the peer; Ray twice with one executor (the first run starts
  the workers, the second finds them kept), with the limiter actor's call count.
- ``grade``: graded judging (``Executor.grade``) of G distinct (query, passage) pairs of queries without labels by
  the ``relevance`` judge against the stub answering ``{"grade": g}`` after 200 ms, with a limit of 20 requests
  in flight (the local client's ``max_concurrency``; Ray's ``max_in_flight``, 2 workers of 0 CPUs). The ideal
  time is ceil(G / 20) x 0.2 s; local, then Ray twice with one executor (workers started, then kept); the grades
  of every run must be equal.
- ``metrics``: an id-labelled precomputed run of Q queries x 100 documents, metrics ndcg@10, recall@100, mrr@10
  computed in chunks of 2,048 queries as Ray tasks (at most 2 x workers chunks out at once) against the local
  executor; the per-query values must be equal (checked on every query, not a sample), and each Ray worker's peak
  resident memory (``ru_maxrss`` sampled on the pooled workers after the run) is printed beside the driver's.
- ``semantic``: the ``semantic`` judge (all-MiniLM-L6-v2, CPU) on P (query, expected, passage) contexts: the local
  executor, then Ray with 1 and 2 workers (1 CPU each). Ray's cost (worker start, model load per worker, pickling
  the contexts) is part of its time, as a user would see it.

- ``--big N``: a TREC run file of N queries x 100 (and its qrels) written to /tmp (deleted after), scored with
  :func:`evret_core.metrics.shards.evaluate_run_file` on Ray: each task reads its own byte range of the file and
  its queries' judgments, the driver holds only the per-query values. Each task reports its process's peak
  resident memory (``ru_maxrss``, measured in the task); the driver's is printed beside it. A sample of blocks of
  10,000 queries is regenerated in memory and scored in-process with ``evaluate_run``: the largest difference is
  printed (and must be below 1e-12). Use ``--parts`` with no other part to run it alone.

Run: ``python benchmarks/ray.py [--parts llm grade metrics semantic] [--llm-contexts 2000] [--grade-contexts 400]
[--queries 50000] [--pairs 5000] [--cpus 2] [--big 0] [--shards S] [--sample-blocks 5]``
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# This file is named ray.py: keep its folder off the path so that ``import ray`` finds Ray, not this script.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import evret_ray  # noqa: E402
import numpy as np  # noqa: E402
import ray  # noqa: E402
from evret_ray.executor import RayExecutor  # noqa: E402

from evret_core import EvaluationDataset, Evaluator, QueryExample, create_judge  # noqa: E402
from evret_core.plugins.loading import get_registry, register_plugin  # noqa: E402
from evret_core.sdk import recipe_of  # noqa: E402
from evret_core.testing.llm_provider import register_stub_provider, stub_options  # noqa: E402
from evret_core.testing.llm_stubs import StubLLMServer, StubReply, StubRequest, always, first_user_prompt  # noqa: E402

METRICS = ["ndcg@10", "recall@100", "mrr@10"]


def text_case(n_queries: int, docs: int, answers: int, seed: int = 0) -> tuple[EvaluationDataset, dict[str, Any]]:
    """Text-labelled queries whose contexts are all distinct: n_queries x docs x answers judgments."""
    rng = np.random.default_rng(seed)
    words = ["honey", "queen", "drone", "wax", "hive", "nectar", "pollen", "swarm", "comb", "larva", "mite"]
    queries, run = [], {}
    for q in range(n_queries):
        expected = [f"{' '.join(rng.choice(words, 4))} {q}-{a}" for a in range(answers)]
        queries.append(QueryExample(query_id=f"q{q}", query_text=f"question {q} about bees",
                                    expected_answers=expected))
        run[f"q{q}"] = [{"doc_id": f"d{q}-{d}", "score": float(docs - d),
                         "text": f"{' '.join(rng.choice(words, 12))} passage {q}-{d}"} for d in range(docs)]
    return EvaluationDataset(queries=queries), run


def part_llm(contexts: int) -> None:
    limit, workers, latency = 40, 4, 0.2
    n_queries = max(1, contexts // 10)
    dataset, run = text_case(n_queries, docs=5, answers=2)
    total = n_queries * 10
    ideal = math.ceil(total / limit) * latency
    print(f"\n## LLM judging: {total} distinct contexts, stub latency {latency * 1000:.0f} ms, limit {limit} in flight")
    ray_executor = RayExecutor(workers=workers, worker_cpus=0, max_in_flight=limit,
                               worker_setup=register_stub_provider)
    # one stub for every run: the Ray runs then build the same judge recipe, and the second finds its workers
    rows = [("local (one client, max_concurrency=40)", "local"),
            (f"ray, first run ({workers} workers started in the run, cluster-wide limit {limit})", ray_executor),
            ("ray, second run of the same executor (workers kept)", ray_executor)]
    results_rows = []
    with StubLLMServer(always("YES", delay=latency)) as stub:
        for label, executor in rows:
            judge = create_judge("llm", cache=False, max_concurrency=limit, **stub_options(stub))
            before, stub.max_in_flight = len(stub.requests), 0
            start = time.perf_counter()
            results = Evaluator(run, metrics=["recall@5"], judge=judge, judge_batch_size=1024,
                                executor=executor, n_resamples=1).evaluate(dataset)
            took = time.perf_counter() - start
            assert len(stub.requests) - before == total, (len(stub.requests) - before, total)
            assert stub.max_in_flight <= limit, stub.max_in_flight
            calls = ray_executor.last_limiter_stats["calls"] if executor is ray_executor else None  # type: ignore[index]
            results_rows.append((label, took, stub.max_in_flight, results.scores["recall@5"], calls))
    ray_executor.shutdown()
    startup = _judge_worker_start(workers)
    print("| executor | time | x ideal | most in flight (stub) | limiter actor calls |\n|---|---|---|---|---|")
    for label, took, peak, _, calls in results_rows:
        print(f"| {label} | {took:.2f} s | {took / ideal:.2f}x | {peak} | {'-' if calls is None else calls} |")
    print(f"ideal: ceil({total}/{limit}) x {latency} s = {ideal:.2f} s; same recall: "
          f"{len({r[3] for r in results_rows}) == 1}")
    print(f"starting {workers} judging workers that build this judge (measured alone): {startup:.2f} s; it overlaps "
          f"the first run's judging (the first worker up takes batches); first run minus second run: "
          f"{results_rows[1][1] - results_rows[2][1]:.2f} s")


def _judge_worker_start(workers: int) -> float:
    """Seconds to start ``workers`` judging actors that build an LLM judge and answer one call."""
    from evret_ray.workers import JudgeWorker

    with StubLLMServer(always("YES")) as stub:
        executor = RayExecutor(workers=workers, worker_cpus=0)
        spec, _ = executor._ship(recipe_of("judge", create_judge("llm", cache=False, **stub_options(stub))))
        start = time.perf_counter()
        actor = ray.remote(JudgeWorker).options(num_cpus=0)
        actors = [actor.remote(spec, None, register_stub_provider) for _ in range(workers)]
        ray.get([a.judge_batch.remote([]) for a in actors])
        took = time.perf_counter() - start
        for a in actors:
            ray.kill(a)
    return took


def part_grade(contexts: int) -> None:
    limit, workers, latency = 20, 2, 0.2
    n_queries = max(1, contexts // 10)
    queries = [QueryExample(query_id=f"q{q}", query_text=f"question {q} about bees") for q in range(n_queries)]
    run = {f"q{q}": [{"doc_id": f"d{q}-{d}", "score": float(10 - d), "text": f"passage {q}-{d} at level {(q + d) % 4}"}
                     for d in range(10)] for q in range(n_queries)}
    dataset, total = EvaluationDataset(queries=queries), n_queries * 10
    ideal = math.ceil(total / limit) * latency
    print(f"\n## Graded judging (relevance): {total} distinct (query, passage) pairs, stub latency "
          f"{latency * 1000:.0f} ms, limit {limit} in flight")

    def graded(request: StubRequest) -> StubReply:
        level = first_user_prompt(request).split(" at level ")[1][0]
        return StubReply(text=f'{{"grade": {level}}}', delay=latency)

    ray_executor = RayExecutor(workers=workers, worker_cpus=0, max_in_flight=limit,
                               worker_setup=register_stub_provider)
    rows = [("local (one client, max_concurrency=20)", "local"),
            (f"ray, first run ({workers} workers started in the run, cluster-wide limit {limit})", ray_executor),
            ("ray, second run of the same executor (workers kept)", ray_executor)]
    results_rows = []
    with StubLLMServer(graded) as stub:
        for label, executor in rows:
            judge = create_judge("relevance", cache=False, max_concurrency=limit, **stub_options(stub))
            before, stub.max_in_flight = len(stub.requests), 0
            start = time.perf_counter()
            results = Evaluator(run, metrics=["ndcg@10"], judge=judge, judge_batch_size=1024,
                                executor=executor, n_resamples=1).evaluate(dataset)
            took = time.perf_counter() - start
            assert len(stub.requests) - before == total, (len(stub.requests) - before, total)
            assert stub.max_in_flight <= limit, stub.max_in_flight
            grades = {q: r.relevant_ids for q, r in results.per_query.items()}
            results_rows.append((label, took, stub.max_in_flight, grades, results.scores["ndcg@10"]))
    ray_executor.shutdown()
    local = results_rows[0][1]
    print("| executor | time | x ideal | x local | most in flight (stub) |\n|---|---|---|---|---|")
    for label, took, peak, _, _ in results_rows:
        print(f"| {label} | {took:.2f} s | {took / ideal:.2f}x | {took / local:.2f}x | {peak} |")
    same = all(r[3] == results_rows[0][3] and r[4] == results_rows[0][4] for r in results_rows)
    print(f"ideal: ceil({total}/{limit}) x {latency} s = {ideal:.2f} s; same grades and ndcg@10 "
          f"({results_rows[0][4]:.4f}) in every run: {same}")
    assert same


def id_case(n_queries: int, seed: int = 1) -> tuple[EvaluationDataset, dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    queries, run = [], {}
    for q in range(n_queries):
        rel = rng.choice(300, size=int(rng.integers(1, 11)), replace=False)
        queries.append(QueryExample(query_id=f"q{q}", query_text=f"q{q}",
                                    relevant_doc_ids={f"d{d}": int(rng.integers(1, 4)) for d in rel}))
        docs = rng.choice(300, size=100, replace=False)
        scores = np.round(rng.random(100), 2)
        run[f"q{q}"] = {f"d{d}": float(s) for d, s in zip(docs, scores, strict=True)}
    return EvaluationDataset(queries=queries), run


@ray.remote
def _worker_maxrss() -> tuple[int, int]:
    return os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def part_metrics(n_queries: int) -> None:
    print(f"\n## Metrics: {n_queries} id-labelled queries x 100 documents ({', '.join(METRICS)})")
    dataset, run = id_case(n_queries)
    out = {}
    for label, executor in (("local", "local"), ("ray", RayExecutor())):
        evaluator = Evaluator(run, metrics=METRICS, executor=executor, n_resamples=1)
        rows = evaluator.retrieve_rows(dataset)
        queries = dataset.queries
        start = time.perf_counter()
        values = evaluator._scores(queries, rows, {})
        out[label] = (time.perf_counter() - start, values)
    equal = all(np.array_equal(out["local"][1][m], out["ray"][1][m]) for m in METRICS)
    seen = dict(ray.get([_worker_maxrss.remote() for _ in range(64)]))
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("| executor | metric step | per-query values equal to local |\n|---|---|---|")
    print(f"| local | {out['local'][0]:.2f} s | - |\n| ray | {out['ray'][0]:.2f} s | {equal} (all {n_queries}) |")
    print(f"peak RSS: driver {driver / 1024:.0f} MiB (holds the run); Ray workers "
          f"{', '.join(f'{v / 1024:.0f}' for v in sorted(seen.values()))} MiB ({len(seen)} pooled workers)")


def part_semantic(pairs: int) -> None:
    print(f"\n## Semantic judging: {pairs} distinct contexts, all-MiniLM-L6-v2 on CPU")
    dataset, run = text_case(max(1, pairs // 10), docs=10, answers=1, seed=2)
    rows = []
    baseline = None
    for label, executor in (("local", "local"), ("ray, 1 worker", RayExecutor(workers=1)),
                            ("ray, 2 workers", RayExecutor(workers=2))):
        judge = create_judge("semantic", cache=False)
        start = time.perf_counter()
        results = Evaluator(run, metrics=["recall@10"], judge=judge, judge_batch_size=max(1, pairs // 8),
                            executor=executor, n_resamples=1).evaluate(dataset)
        took = time.perf_counter() - start
        if isinstance(executor, RayExecutor):  # its kept workers hold their CPUs until then
            executor.shutdown()
        scores = {q: r.scores for q, r in results.per_query.items()}
        baseline = scores if baseline is None else baseline
        rows.append((label, took, scores == baseline))
    print("| executor | time | vs local | per-query scores equal |\n|---|---|---|---|")
    for label, took, same in rows:
        print(f"| {label} | {took:.2f} s | {rows[0][1] / took:.2f}x | {same} |")
    start, threads = _semantic_worker_start()
    print(f"one Ray worker (1 CPU) started and its model loaded, measured alone: {start:.2f} s; torch threads in a "
          f"1-CPU worker: {threads} (Ray sets OMP_NUM_THREADS to the worker's CPUs); in this process: "
          f"{_torch_threads()}")


def _torch_threads() -> int:
    import torch

    return int(torch.get_num_threads())


@ray.remote(num_cpus=1)
def _worker_torch_threads() -> int:
    return _torch_threads()


def _semantic_worker_start() -> tuple[float, int]:
    """Seconds to start one 1-CPU judging worker that loads the semantic judge's model and judges one context."""
    from evret_ray.workers import JudgeWorker

    from evret_core.contracts.judge import JudgmentContext

    executor = RayExecutor(workers=1)
    spec, _ = executor._ship(recipe_of("judge", create_judge("semantic", cache=False)))
    start = time.perf_counter()
    worker = ray.remote(JudgeWorker).options(num_cpus=1).remote(spec, None, None)
    ray.get(worker.judge_batch.remote([JudgmentContext(query="q", expected_text="a", retrieved_text="a b")]))
    took = time.perf_counter() - start
    ray.kill(worker)
    return took, ray.get(_worker_torch_threads.remote())


def _runfile_gen() -> Any:
    """benchmarks/runfile_gen.py (this folder is kept off sys.path, see above)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("runfile_gen", Path(__file__).with_name("runfile_gen.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_big(n: int, shards: int | None, sample_blocks: int) -> None:
    """N queries x 100 in a run file, scored in shards that Ray tasks read themselves; a sample of blocks
    regenerated in memory and scored in-process with evaluate_run for the comparison."""
    import shutil
    import tempfile

    from evret_core.metrics.engine import evaluate_run
    from evret_core.metrics.shards import evaluate_run_file, shard_ranges

    print(f"\n## Metrics on a run file: {n:,} queries x 100 documents ({', '.join(METRICS)}), shards on Ray")
    folder = Path(tempfile.mkdtemp(prefix="evret-big-", dir="/tmp"))
    try:
        start = time.perf_counter()
        gen = _runfile_gen()
        run_path, qrels_path = gen.write(folder, n)
        print(f"wrote {run_path.stat().st_size / 2**30:.1f} GiB run, {qrels_path.stat().st_size / 2**20:.0f} MiB "
              f"qrels in {time.perf_counter() - start:.0f} s")
        ranges = shard_ranges(run_path, shards)
        driver_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        got = evaluate_run_file(qrels_path, run_path, METRICS, shards=len(ranges), executor=RayExecutor())
        took = time.perf_counter() - start
        driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert len(got.qids) == n, len(got.qids)
        blocks = np.linspace(0, -(-n // gen.BLOCK) - 1, sample_blocks).astype(int).tolist()
        worst, compared = 0.0, 0
        start = time.perf_counter()
        for block in sorted(set(blocks)):
            run, qrels = gen.block_dicts(block, n)
            local = evaluate_run(qrels, run, METRICS, per_query=True)
            for qid, values in local.items():
                mine = got.per_query(qid)
                worst = max(worst, *(abs(mine[m] - v) for m, v in values.items()))
                compared += 1
        local_time = time.perf_counter() - start
        means = got.means()
        peaks = sorted(got.shard_peak_rss)
        print("| shards | Ray time (read + qrels + metrics) | queries | lines per second | worker peak RSS "
              "(min / median / max over shards) | driver peak RSS | sample vs in-process |")
        print("|---|---|---|---|---|---|---|")
        print(f"| {len(ranges)} of ~{run_path.stat().st_size / len(ranges) / 2**20:.0f} MiB | {took:.1f} s | {n:,} | "
              f"{n * 100 / took / 1e6:.2f} M | {peaks[0] / 2**20:.0f} / {peaks[len(peaks) // 2] / 2**20:.0f} / "
              f"{peaks[-1] / 2**20:.0f} MiB | {driver / 1024:.0f} MiB (before: {driver_before / 1024:.0f}) | "
              f"{compared:,} queries, max abs difference {worst:.1e} |")
        print(f"means: {', '.join(f'{k} {v:.4f}' for k, v in means.items())}; in-process time for the sample: "
              f"{local_time:.1f} s ({compared / local_time:,.0f} queries/s incl. building the dicts); worker pids: "
              f"{len(set(got.shard_pids))}")
        assert worst < 1e-12, worst
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="*", default=["llm", "grade", "metrics", "semantic"])
    parser.add_argument("--llm-contexts", type=int, default=2000)
    parser.add_argument("--grade-contexts", type=int, default=400)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--big", type=int, default=0,
                        help="queries x 100 of the run-file case scored in shards on Ray (adds the 'big' part)")
    parser.add_argument("--shards", type=int, default=None, help="shards of the big run (default: one per 256 MiB)")
    parser.add_argument("--sample-blocks", type=int, default=5, help="blocks of 10,000 queries compared in-process")
    args = parser.parse_args()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    from importlib.metadata import entry_points

    installed = any(ep.name == "evret-ray" for ep in entry_points(group="evret"))
    if not installed and "evret-ray" not in get_registry().plugins:
        register_plugin(evret_ray, name="evret-ray")
    print(f"Ray {ray.__version__}, local cluster of {args.cpus} CPUs, os.cpu_count()={os.cpu_count()}")
    try:
        if "llm" in args.parts:
            part_llm(args.llm_contexts)
        if "grade" in args.parts:
            part_grade(args.grade_contexts)
        if "metrics" in args.parts:
            part_metrics(args.queries)
        if "semantic" in args.parts:
            part_semantic(args.pairs)
        if args.big:
            part_big(args.big, args.shards, args.sample_blocks)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
