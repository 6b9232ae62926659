"""Rank fusion of two runs: Evret's ``fuse_runs`` against ranx's ``fuse``, in one run of this script.

Issue 37. Two runs of N queries x D documents (default 100,000 x 100; each query's documents drawn from 3 x D ids so
the runs overlap in part; scores with two decimals, so ties occur) as ``{qid: {docid: score}}`` dicts. Rows, each
the best of ``--repeat``:

- Evret ``fuse_runs(dicts)``: dicts in (each query's ranking sorted by score, ties by id), fused, dicts out;
- ranx ``fuse([Run, Run])`` cold: the first call in a process whose numba cache is empty (``NUMBA_CACHE_DIR`` a new
  folder), so it includes the JIT compilation; run in a child process, once per method;
- ranx ``fuse`` warm: the same call again after that (its input ``Run`` objects built beforehand, not timed;
  their build time is printed apart).

Methods: ``rrf`` (k=60) and ``sum`` over ``min-max`` (CombSUM). numba's threads are ranx's default (one per CPU)
unless ``--ranx-threads`` is given; Evret runs on one thread. The check at the end: Evret's time over ranx's warm
time, which the issue wants at most 1. Each row prints the machine's 1-minute load average before Evret's call
and after ranx's (the two are measured one after the other, per method). Run: ``python benchmarks/fusion.py [--queries 100000] [--depth 100]
[--repeat 3] [--ranx-threads N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

METHODS = (("rrf", "min-max"), ("sum", "min-max"))


def make_run(seed: int, queries: int, depth: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    # D distinct ids out of 3 x D per query: a random permutation's first D
    picks = np.argsort(rng.random((queries, 3 * depth)), axis=1)[:, :depth]
    scores = np.round(rng.random((queries, depth)) * 20.0, 2)
    names = [f"d{i}" for i in range(3 * depth)]
    return {f"q{q}": dict(zip([names[i] for i in row], map(float, score), strict=True))
            for q, (row, score) in enumerate(zip(picks.tolist(), scores, strict=True))}


def best(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def child(args: argparse.Namespace) -> None:
    """In a fresh process: ranx cold (first call, JIT included), then warm (best of --repeat); prints JSON."""
    import warnings

    warnings.simplefilter("ignore")
    from ranx import Run, fuse

    a, b = make_run(1, args.queries, args.depth), make_run(2, args.queries, args.depth)
    start = time.perf_counter()
    runs = [Run(a), Run(b)]
    built = time.perf_counter() - start
    method, norm = args.child.split(":")
    start = time.perf_counter()
    fuse(runs, norm=norm, method=method)
    cold = time.perf_counter() - start
    warm, _ = best(lambda: fuse(runs, norm=norm, method=method), args.repeat)
    print(json.dumps({"cold": cold, "warm": warm, "built": built}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ranx-threads", type=int, default=None)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from evret_core.retrieve.fusion import fuse_runs

    print(f"two runs of {args.queries:,} queries x {args.depth} documents; {os.cpu_count()} CPUs; "
          f"ranx threads: {args.ranx_threads or 'numba default'}")
    start = time.perf_counter()
    a, b = make_run(1, args.queries, args.depth), make_run(2, args.queries, args.depth)
    print(f"runs made in {time.perf_counter() - start:.1f} s")
    rows = []
    for method, norm in METHODS:
        load_before = os.getloadavg()[0]
        ours, fused = best(lambda m=method, n=norm: fuse_runs([a, b], method=m, norm=n), args.repeat)
        assert len(fused) == args.queries
        env = dict(os.environ)
        if args.ranx_threads:
            env["NUMBA_NUM_THREADS"] = str(args.ranx_threads)
        with tempfile.TemporaryDirectory() as cache:
            env["NUMBA_CACHE_DIR"] = cache
            proc = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--child", f"{method}:{norm}", "--queries",
                 str(args.queries), "--depth", str(args.depth), "--repeat", str(args.repeat)],
                env=env, capture_output=True, text=True, check=True)
        ranx = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append((method, norm, ours, ranx))
        load = f"load average (1 min) {load_before:.1f} before evret, {os.getloadavg()[0]:.1f} after ranx"
        print(f"{method:>4} {norm:8} evret {ours:7.2f} s | ranx warm {ranx['warm']:7.2f} s, cold (JIT) "
              f"{ranx['cold']:7.2f} s, Run() x2 {ranx['built']:6.1f} s | evret / ranx warm "
              f"{ours / ranx['warm']:.2f}x, ranx cold / evret {ranx['cold'] / ours:.1f}x | {load}", flush=True)
    print("check: evret at most ranx's warm time:",
          ", ".join(f"{m} {'yes' if o <= r['warm'] else 'NO'} ({o / r['warm']:.2f}x)" for m, _, o, r in rows))


if __name__ == "__main__":
    main()
