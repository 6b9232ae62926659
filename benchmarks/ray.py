"""Benchmark: the ``ray`` executor (evret-ray) against the in-process ``local`` executor and the ideal, in one run
(issue 17). Ray runs as a local cluster on this machine (``--cpus``, default 2).

- ``llm``: LLM judging of N distinct contexts against the stub server answering after 200 ms, with a cluster-wide
  limit of 40 requests in flight and 4 judging workers (0 CPUs each: they wait on the network). The ideal time is
  ceil(N / 40) x 0.2 s; the stub counts the requests in flight and reports the most it saw. The in-process
  executor with ``max_concurrency=40`` is measured as the peer; Ray twice with one executor (the first run starts
  the workers, the second finds them kept), with the limiter actor's call count.
- ``metrics``: an id-labelled precomputed run of Q queries x 100 documents, metrics ndcg@10, recall@100, mrr@10
  computed in chunks of 2,048 queries as Ray tasks (at most 2 x workers chunks out at once) against the local
  executor; the per-query values must be equal (checked on every query, not a sample), and each Ray worker's peak
  resident memory (``ru_maxrss`` sampled on the pooled workers after the run) is printed beside the driver's.
- ``semantic``: the ``semantic`` judge (all-MiniLM-L6-v2, CPU) on P (query, expected, passage) contexts: the local
  executor, then Ray with 1 and 2 workers (1 CPU each). Ray's cost (worker start, model load per worker, pickling
  the contexts) is part of its time, as a user would see it.

Run: ``python benchmarks/ray.py [--parts llm metrics semantic] [--llm-contexts 2000] [--queries 50000]
[--pairs 5000] [--cpus 2]``
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
from evret_core.plugins import get_registry, register_plugin  # noqa: E402
from evret_core.testing.llm_provider import register_stub_provider, stub_options  # noqa: E402
from evret_core.testing.llm_stubs import StubLLMServer, always  # noqa: E402

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
        spec, _ = executor._ship(create_judge("llm", cache=False, **stub_options(stub)), "judge")
        start = time.perf_counter()
        actor = ray.remote(JudgeWorker).options(num_cpus=0)
        actors = [actor.remote(spec, None, register_stub_provider) for _ in range(workers)]
        ray.get([a.judge_batch.remote([]) for a in actors])
        took = time.perf_counter() - start
        for a in actors:
            ray.kill(a)
    return took


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

    from evret_core.models import JudgmentContext

    executor = RayExecutor(workers=1)
    spec, _ = executor._ship(create_judge("semantic", cache=False), "judge")
    start = time.perf_counter()
    worker = ray.remote(JudgeWorker).options(num_cpus=1).remote(spec, None, None)
    ray.get(worker.judge_batch.remote([JudgmentContext(query="q", expected_text="a", retrieved_text="a b")]))
    took = time.perf_counter() - start
    ray.kill(worker)
    return took, ray.get(_worker_torch_threads.remote())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", default=["llm", "metrics", "semantic"])
    parser.add_argument("--llm-contexts", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--cpus", type=int, default=2)
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
        if "metrics" in args.parts:
            part_metrics(args.queries)
        if "semantic" in args.parts:
            part_semantic(args.pairs)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
