"""Benchmark: Evret's metrics engine against pytrec_eval (pytrec-eval-terrier) and ranx, in one process.

Generates a synthetic run (N queries x 100 retrieved documents, 1-10 relevant documents per query with grades
1-3, some of them not retrieved, scores rounded so that ties occur), then times ndcg@10, ap@100, mrr@10,
precision@10, recall@100 and hit_rate@10, per query, with:

- Evret from the dict format (``evaluate_run``; with the compiled dict reader where it was built, and forced
  onto the pure numpy path with ``EVRET_PURE_PYTHON=1``), from ranked lists (``evaluate_rankings``, likewise with
  the compiled list reader and on the numpy path) and from arrays
  (a ``RankedBatch`` of grade matrices, the form the retrieval evaluator hands over);
- pytrec_eval (ndcg_cut_10, map_cut_100, recip_rank, P_10, recall_100, success_10; its recip_rank has no
  cutoff, so mrr@10 is compared as recip_rank when the first relevant rank is <= 10, else 0);
- ranx (its first call, which compiles with numba, is timed apart).

Every library's per-query values are checked against Evret's to 1e-9. Peak extra memory is the rise of the
process's peak resident set (VmHWM, reset before each call through /proc/self/clear_refs) over the resident set
before the call, so it also sees C++ and numba allocations.

Run: ``.venv/bin/python benchmarks/metrics.py [--queries 10000 100000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from evret_core.contracts.metric import RankedBatch
from evret_core.io.trec import ranked_docs
from evret_core.metrics.engine import accelerator, evaluate_rankings, evaluate_run, resolve_metrics

DEPTH = 100
METRICS = ["ndcg@10", "ap@100", "mrr@10", "precision@10", "recall@100", "hit_rate@10"]
PYTREC = {"ndcg@10": "ndcg_cut_10", "ap@100": "map_cut_100", "mrr@10": "recip_rank", "precision@10": "P_10",
          "recall@100": "recall_100", "hit_rate@10": "success_10"}
RANX = {"ndcg@10": "ndcg@10", "ap@100": "map@100", "mrr@10": "mrr@10", "precision@10": "precision@10",
        "recall@100": "recall@100", "hit_rate@10": "hit_rate@10"}


def synthetic(n_queries: int, seed: int = 0) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """qrels ``{qid: {docid: grade}}`` and run ``{qid: {docid: score}}`` in the pytrec_eval / ranx formats."""
    rng = np.random.default_rng(seed)
    prime = 1_000_003
    offsets = rng.integers(0, prime, size=n_queries)
    # distinct ids within a query: offset + j * 7919 modulo a prime
    ids = (offsets[:, None] + np.arange(DEPTH)[None, :] * 7919) % prime
    scores = np.round(rng.random((n_queries, DEPTH)), 4)  # 4 decimals: ties in about a third of the queries
    n_rel = rng.integers(1, 11, size=n_queries)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs = [f"d{i}" for i in ids[q].tolist()]
        run[qid] = dict(zip(docs, scores[q].tolist(), strict=True))
        picks = rng.choice(DEPTH + 20, size=int(n_rel[q]), replace=False)
        grades = rng.integers(1, 4, size=len(picks)).tolist()
        qrels[qid] = {(docs[p] if p < DEPTH else f"unretrieved{q}_{p}"): g
                      for p, g in zip(picks.tolist(), grades, strict=True)}
    return qrels, run


def _rss_kib(field: str) -> int:
    match = re.search(rf"{field}:\s+(\d+)", open("/proc/self/status").read())
    return int(match.group(1)) if match else 0


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float, Any]:
    """Best wall time and best CPU time of ``repeat`` calls, peak extra memory (MiB) of the first, its result."""
    best = best_cpu = float("inf")
    peak = 0.0
    result = None
    for i in range(repeat):
        gc.collect()
        before = _rss_kib("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")
        except OSError:
            pass
        start, start_cpu = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
        if i == 0:
            peak = max(_rss_kib("VmHWM") - before, 0) / 1024
            result = out
        del out
    return best, best_cpu, peak, result


def compare(name: str, ours: dict[str, dict[str, float]], theirs: dict[str, dict[str, float]]) -> str:
    worst = 0.0
    for qid, values in ours.items():
        for metric, value in values.items():
            worst = max(worst, abs(value - theirs[qid][metric]))
    return f"{name}: max |diff| {worst:.1e} {'OK' if worst <= 1e-9 else 'DISAGREE'}"


def pytrec_per_query(raw: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for qid, values in raw.items():
        row = {m: values[name] for m, name in PYTREC.items()}
        rr = row["mrr@10"]
        row["mrr@10"] = rr if rr * 10 >= 1 - 1e-12 else 0.0  # recip_rank has no cutoff: mrr@10 keeps ranks <= 10
        out[qid] = row
    return out


def bench(n_queries: int, repeat: int, skip: list[str]) -> list[tuple[str, float, float, float]]:
    print(f"\n## {n_queries:,} queries x {DEPTH} documents")
    t0 = time.perf_counter()
    qrels, run = synthetic(n_queries)
    print(f"(generated in {time.perf_counter() - t0:.1f}s)")
    rows: list[tuple[str, float, float, float]] = []
    metrics = resolve_metrics(METRICS)

    # the dict path twice: with the compiled dict reader (when built) and forced onto the pure numpy path
    pure_env = os.environ.get("EVRET_PURE_PYTHON")
    os.environ["EVRET_PURE_PYTHON"] = "1"
    t, cpu, mem, ours = measure(lambda: evaluate_run(qrels, run, metrics, per_query=True), repeat)
    rows.append(("evret, dict run (evaluate_run), numpy path", t, cpu, mem))
    os.environ.pop("EVRET_PURE_PYTHON")
    if accelerator() is not None:
        t, cpu, mem, compiled = measure(lambda: evaluate_run(qrels, run, metrics, per_query=True), repeat)
        rows.insert(0, ("evret, dict run (evaluate_run), compiled reader", t, cpu, mem))
        print(compare("evret compiled reader vs numpy path", ours, compiled))
        del compiled
    else:
        print("compiled reader not built (evret_core.metrics._fastrank): numpy path only")
    if pure_env is not None:
        os.environ["EVRET_PURE_PYTHON"] = pure_env

    # ranked lists twice too: with the compiled list reader (when built) and on the pure numpy path
    rankings = {q: ranked_docs(scores) for q, scores in run.items()}
    os.environ["EVRET_PURE_PYTHON"] = "1"
    t, cpu, mem, from_lists = measure(lambda: evaluate_rankings(qrels, rankings, metrics, per_query=True), repeat)
    rows.append(("evret, ranked lists (evaluate_rankings), numpy path", t, cpu, mem))
    print(compare("evret ranked lists (numpy path) vs dict", ours, from_lists))
    os.environ.pop("EVRET_PURE_PYTHON")
    if accelerator() is not None:
        t, cpu, mem, from_lists = measure(
            lambda: evaluate_rankings(qrels, rankings, metrics, per_query=True), repeat)
        rows.insert(len(rows) - 1, ("evret, ranked lists (evaluate_rankings), compiled reader", t, cpu, mem))
        print(compare("evret ranked lists (compiled reader) vs dict", ours, from_lists))
    if pure_env is not None:
        os.environ["EVRET_PURE_PYTHON"] = pure_env
    del from_lists

    qids = list(run)
    batch0 = RankedBatch.from_rankings([rankings[q] for q in qids], [qrels[q] for q in qids], depth=DEPTH)
    grades, judged, num_ret = batch0.grades.copy(), batch0.qrel_grades.copy(), batch0.num_ret.copy()
    del batch0
    rankings = {}  # free the ranked lists before the peers run

    def from_arrays() -> list[np.ndarray]:
        batch = RankedBatch(grades, judged, num_ret)
        return [m.compute(batch) for m in metrics]

    t, cpu, mem, columns = measure(from_arrays, repeat)
    rows.append(("evret, arrays (RankedBatch)", t, cpu, mem))
    as_dict = {q: {m.name: float(c[i]) for m, c in zip(metrics, columns, strict=True)} for i, q in enumerate(qids)}
    print(compare("evret arrays vs dict", ours, as_dict))

    try:
        if "pytrec_eval" in skip:
            raise ImportError
        import pytrec_eval
    except ImportError:
        print("pytrec_eval skipped or not installed (pip install pytrec-eval-terrier)")
    else:
        def run_pytrec() -> dict[str, dict[str, float]]:
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC.values()))
            return evaluator.evaluate(run)  # type: ignore[no-any-return]

        t, cpu, mem, raw = measure(run_pytrec, repeat)
        rows.append(("pytrec_eval", t, cpu, mem))
        print(compare("pytrec_eval vs evret", ours, pytrec_per_query(raw)))
        del raw

    try:
        if "ranx" in skip:
            raise ImportError
        import ranx
    except ImportError:
        print("ranx skipped or not installed")
    else:
        def run_ranx(qr: dict[str, dict[str, int]], rn: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
            r = ranx.Run(rn)
            ranx.evaluate(ranx.Qrels(qr), r, list(RANX.values()), return_mean=False, make_comparable=True)
            return {q: {m: float(r.scores[name][q]) for m, name in RANX.items()} for q in r.keys()}

        small_q = dict(list(qrels.items())[:10])
        small_r = {q: run[q] for q in small_q}
        start = time.perf_counter()
        run_ranx(small_q, small_r)
        print(f"ranx first call (numba JIT compile, 10 queries): {time.perf_counter() - start:.2f}s")
        t, cpu, mem, theirs = measure(lambda: run_ranx(qrels, run), repeat)
        rows.append(("ranx (after JIT)", t, cpu, mem))
        print(compare("ranx vs evret", ours, theirs))
        differ, untied = _disagreements(run, ours, theirs)
        if differ:
            print(f"  ranx differs on {differ} queries, {untied} of them without tied scores "
                  "(ranx does not break score ties by document id as trec_eval does)")
        del theirs

    base = {name: (t, cpu) for name, t, cpu, _ in rows}.get("pytrec_eval")
    print(f"\n| {n_queries:,} queries | wall (s) | vs pytrec_eval | CPU (s) | vs pytrec_eval, CPU | peak extra memory (MiB) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, t, cpu, mem in rows:
        ratio = f"{base[0] / t:.1f}x" if base else "-"
        ratio_cpu = f"{base[1] / cpu:.1f}x" if base else "-"
        print(f"| {name} | {t:.3f} | {ratio} | {cpu:.3f} | {ratio_cpu} | {mem:.0f} |")
    return rows


def _disagreements(run: Any, ours: Any, theirs: Any) -> tuple[int, int]:
    """Queries where a peer differs from Evret by more than 1e-9, and how many of those have no tied scores."""
    differ = untied = 0
    for qid, values in ours.items():
        if any(abs(v - theirs[qid][m]) > 1e-9 for m, v in values.items()):
            differ += 1
            scores = list(run[qid].values())
            untied += len(set(scores)) == len(scores)
    return differ, untied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", nargs="*", default=[], choices=["pytrec_eval", "ranx"], help="peers to leave out")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, numpy {np.__version__}")
    for n in args.queries:
        bench(n, args.repeat, args.skip)


if __name__ == "__main__":
    main()
