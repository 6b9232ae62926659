"""Reading TREC run and qrels files: Evret's readers against pyarrow's CSV reader and pytrec_eval, in one process.

Issue 26 part 1. The files are runfile_gen.py's (``q0000042 Q0 d0000042_007 008 12.3 bench``: N queries x 100
lines; qrels 1-10 judgments per query), written to a temporary folder and read once before timing (so every
reader finds them in the page cache). Each reader runs ``--repeat`` times; the best wall time counts. Rows:

- ``read_run`` (dicts), ``read_run_columns`` (columns), the shard reader (``read_run_columns`` on each of 4 byte
  ranges from ``shard_ranges``, one after another), ``read_qrels``: compiled tokenizer, then the numpy path
  (``EVRET_PURE_PYTHON``) for the run readers;
- pyarrow ``csv.read_csv`` (space-delimited, on one thread and on all), pytrec_eval ``parse_run``/``parse_qrel``
  (pure Python), where installed.

Ratios are against pyarrow on one thread and pytrec_eval's parse_run (for qrels: parse_qrel), measured in the
same run. Run: ``python benchmarks/trec_read.py --queries 50000 [--repeat 3] [--skip-pure]``; the 1M x 100 file:
``--queries 1000000 --repeat 1 --columns-only``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import runfile_gen  # noqa: E402

from evret_core.metrics import trecscan  # noqa: E402
from evret_core.metrics.runcolumns import read_run_columns  # noqa: E402
from evret_core.metrics.shards import shard_ranges  # noqa: E402
from evret_core.metrics.trec import read_qrels, read_run  # noqa: E402


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """The best wall time and the best CPU time of this process over ``repeat`` calls (the result is dropped, then
    collected, before the next). On a loaded machine CPU time is the steadier of the two."""
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        del result
    return min(walls), min(cpus)


def peers(run: Path, qrels: Path) -> dict[str, Callable[[], Any]]:
    out: dict[str, Callable[[], Any]] = {}
    try:
        import pyarrow.csv as pcsv
    except ImportError:
        print("pyarrow not installed: no pyarrow rows")
    else:
        def arrow(path: Path, threads: bool) -> Any:
            return pcsv.read_csv(path, read_options=pcsv.ReadOptions(autogenerate_column_names=True,
                                                                     use_threads=threads),
                                 parse_options=pcsv.ParseOptions(delimiter=" "))

        out["pyarrow read_csv, 1 thread"] = lambda: arrow(run, False)
        out[f"pyarrow read_csv, {os.cpu_count()} threads"] = lambda: arrow(run, True)
        out["pyarrow read_csv qrels, 1 thread"] = lambda: arrow(qrels, False)
    try:
        import pytrec_eval
    except ImportError:
        print("pytrec_eval not installed: no pytrec_eval rows")
    else:
        def parse(path: Path, fn: Callable[[Any], Any]) -> Any:
            with path.open() as handle:
                return fn(handle)

        out["pytrec_eval parse_run"] = lambda: parse(run, pytrec_eval.parse_run)
        out["pytrec_eval parse_qrel"] = lambda: parse(qrels, pytrec_eval.parse_qrel)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-pure", action="store_true", help="leave out the numpy path's rows")
    parser.add_argument("--folder", help="where to write the files (default: a temporary folder)")
    parser.add_argument("--columns-only", action="store_true",
                        help="only read_run_columns and the shard reader, no peer (for 1M queries x 100: dicts of "
                             "100M lines do not fit in memory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        run, qrels = runfile_gen.write(Path(tmp), args.queries)
        lines = args.queries * runfile_gen.DEPTH
        judged = sum(1 for _ in qrels.open("rb"))
        size = run.stat().st_size
        run.read_bytes(), qrels.read_bytes()  # into the page cache
        print(f"run file: {args.queries:,} queries x {runfile_gen.DEPTH} = {lines:,} lines, {size / 1e6:.0f} MB; "
              f"qrels {judged:,} lines; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
              f"compiled tokenizer: {'yes' if trecscan._trecscan is not None else 'no'}")
        ranges = shard_ranges(run, 4)
        ours: dict[str, Callable[[], Any]] = {
            "evret read_run (dicts)": lambda: read_run(run),
            "evret read_run_columns": lambda: read_run_columns(run),
            "evret shard reader (4 ranges)": lambda: [read_run_columns(run, a, b) for a, b in ranges],
            "evret read_qrels": lambda: read_qrels(qrels),
        }
        if args.columns_only:
            ours = {k: v for k, v in ours.items() if "columns" in k or "shard" in k}
        times: dict[str, tuple[float, float]] = {}
        for name, fn in ours.items():
            times[name] = best(fn, args.repeat)
        if not args.skip_pure and not args.columns_only and trecscan._trecscan is not None:
            os.environ["EVRET_PURE_PYTHON"] = "1"
            try:
                for name in ("evret read_run (dicts)", "evret read_run_columns", "evret read_qrels"):
                    times[name + ", numpy path"] = best(ours[name], args.repeat)
            finally:
                del os.environ["EVRET_PURE_PYTHON"]
        for name, fn in ({} if args.columns_only else peers(run, qrels)).items():
            times[name] = best(fn, args.repeat)
    print("\n| reader | wall (s) | CPU (s) | M lines/s (CPU) | vs pyarrow, 1 thread (wall / CPU) | "
          "vs pytrec_eval (wall / CPU) |\n|---|---|---|---|---|---|")
    for name, (wall, cpu) in times.items():
        qrels_row = "qrel" in name
        n = judged if qrels_row else lines
        peers_of = [times.get("pyarrow read_csv qrels, 1 thread" if qrels_row else "pyarrow read_csv, 1 thread"),
                    times.get("pytrec_eval parse_qrel" if qrels_row else "pytrec_eval parse_run")]
        ratios = [f"{p[0] / wall:.2f}x / {p[1] / cpu:.2f}x" if p else "-" for p in peers_of]
        print(f"| {name} | {wall:.3f} | {cpu:.3f} | {n / cpu / 1e6:.2f} | {ratios[0]} | {ratios[1]} |")
    print("\n(ratios: the peer's time / this row's time; above 1x this row is faster. CPU: this process's CPU "
          "time, all threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
