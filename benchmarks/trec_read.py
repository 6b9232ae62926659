"""Reading TREC run and qrels files: Evret's readers against pyarrow's CSV reader and pytrec_eval, in one process.

Issue 26 part 1. The files are runfile_gen.py's (``q0000042 Q0 d0000042_007 008 12.3 bench``: N queries x 100
lines; qrels 1-10 judgments per query), written to a temporary folder and read once before timing (so every
reader finds them in the page cache). Each reader runs ``--repeat`` times; the best wall time counts. Rows:

- ``read_run`` (dicts) and ``read_run_columns`` (columns), each on one thread and on the threads they pick for the
  file (one per CPU, at most 4; rows named "N threads", compared with pyarrow on all CPUs in wall time), the shard reader (``read_run_columns`` on each of 4 byte ranges from ``shard_ranges``, one
  after another, one thread each), ``read_qrels``: compiled tokenizer, then the numpy path (``EVRET_PURE_PYTHON``)
  for the run readers;
- pyarrow ``csv.read_csv`` (space-delimited, on one thread and on all), pytrec_eval ``parse_run``/``parse_qrel``
  (pure Python), where installed.

Ratios are against pyarrow on one thread and on all CPUs (wall) and pytrec_eval's parse_run (for qrels:
parse_qrel), each on the same file, measured in the same run; a last list checks each target of the issue. The
dict reader shares one float object per value while values repeat, so it also reads a copy of the run in which
every line has its own score (runfile_gen's has 201 values), against the peers on that copy. ``read_qrels`` is
also timed for one shard's queries (a quarter of them, as ``evret trec --shards 4`` reads the qrels in each
shard). Run: ``python benchmarks/trec_read.py --queries 50000 [--repeat 3] [--skip-pure] [--cold N]``; the 1M x 100 file:
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

from evret_core.io import trecscan  # noqa: E402
from evret_core.io.runcolumns import read_run_columns, scan_threads  # noqa: E402
from evret_core.io.trec import read_qrels, read_run  # noqa: E402
from evret_core.metrics.shards import shard_ranges  # noqa: E402


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


DISTINCT = "run, every score distinct"


def distinct_scores(run: Path) -> Path:
    """A copy of runfile_gen's run in which every line has its own score, ``0.`` and 8 digits (as a dense
    retriever's cosine scores look), instead of runfile_gen's 201 values: the dict readers share one float object
    per value while values repeat, and this file shows the cost when they do not (runfile_gen's lines are
    fixed-width: 40 bytes, the score in bytes 29-32; the copy's are 46)."""
    import numpy as np

    lines = np.fromfile(run, dtype=np.uint8).reshape(-1, 40)
    assert bytes(lines[0, 29:33]).replace(b".", b"0").isdigit(), "not runfile_gen's fixed-width layout"
    value = (np.arange(len(lines), dtype=np.int64) * 982_451_653 + 12_345) % 100_000_000  # distinct: 10**8 > lines
    assert len(lines) <= 100_000_000
    out = np.empty((len(lines), 46), dtype=np.uint8)
    out[:, :29] = lines[:, :29]
    out[:, 29:31] = np.frombuffer(b"0.", dtype=np.uint8)
    for k in range(8):
        out[:, 38 - k] = 48 + value // 10**k % 10
    out[:, 39:] = np.frombuffer(b" bench\n", dtype=np.uint8)
    path = run.with_name("run_distinct.trec")
    out.tofile(path)
    return path


def peers(files: dict[str, Path]) -> dict[str, tuple[str, Callable[[], Any]]]:
    """The peers' rows: name -> (the file they read, how)."""
    out: dict[str, tuple[str, Callable[[], Any]]] = {}
    try:
        import pyarrow.csv as pcsv
    except ImportError:
        print("pyarrow not installed: no pyarrow rows")
    else:
        def arrow(path: Path, threads: bool) -> Any:
            return pcsv.read_csv(path, read_options=pcsv.ReadOptions(autogenerate_column_names=True,
                                                                     use_threads=threads),
                                 parse_options=pcsv.ParseOptions(delimiter=" "))

        for kind, path in files.items():
            out[f"pyarrow read_csv, 1 thread ({kind})"] = (kind, lambda path=path: arrow(path, False))
            out[f"pyarrow read_csv, {os.cpu_count()} threads ({kind})"] = (kind, lambda path=path: arrow(path, True))
    try:
        import pytrec_eval
    except ImportError:
        print("pytrec_eval not installed: no pytrec_eval rows")
    else:
        def parse(path: Path, fn: Callable[[Any], Any]) -> Any:
            with path.open() as handle:
                return fn(handle)

        for kind, path in files.items():
            fn = pytrec_eval.parse_qrel if kind == "qrels" else pytrec_eval.parse_run
            out[f"pytrec_eval {fn.__name__} ({kind})"] = (kind, lambda path=path, fn=fn: parse(path, fn))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-pure", action="store_true", help="leave out the numpy path's rows")
    parser.add_argument("--folder", help="where to write the files (default: a temporary folder)")
    parser.add_argument("--cold", type=int, default=0, metavar="N",
                        help="also read the qrels once in each of N fresh processes per reader (best of N): no "
                             "reader reuses memory an earlier read freed (pyarrow keeps its pool between reads)")
    parser.add_argument("--columns-only", action="store_true",
                        help="only read_run_columns and the shard reader, no peer (for 1M queries x 100: dicts of "
                             "100M lines do not fit in memory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        run, qrels = runfile_gen.write(Path(tmp), args.queries)
        files = {"run": run, "qrels": qrels}
        if not args.columns_only:
            files[DISTINCT] = distinct_scores(run)
        lines = args.queries * runfile_gen.DEPTH
        judged = sum(1 for _ in qrels.open("rb"))
        size = run.stat().st_size
        for path in files.values():
            path.read_bytes()  # into the page cache
        load = os.getloadavg()[0]
        print(f"run file: {args.queries:,} queries x {runfile_gen.DEPTH} = {lines:,} lines, {size / 1e6:.0f} MB; "
              f"qrels {judged:,} lines; load average {load:.2f} on {os.cpu_count()} CPUs; "
              f"compiled tokenizer: {'yes' if trecscan._trecscan is not None else 'no'}")
        ranges = shard_ranges(run, 4)
        threads = scan_threads(0, None, size)  # what read_run_columns picks for this file
        distinct = files.get(DISTINCT, run)
        quarter = set(list(read_qrels(qrels))[::4])
        ours: dict[str, tuple[str, Callable[[], Any]]] = {
            "evret read_run (dicts)": ("run", lambda: read_run(run, threads=1)),
            f"evret read_run (dicts), {threads} threads": ("run", lambda: read_run(run)),
            "evret read_run_columns": ("run", lambda: read_run_columns(run, threads=1)),
            f"evret read_run_columns, {threads} threads": ("run", lambda: read_run_columns(run)),
            "evret shard reader (4 ranges)": ("run", lambda: [read_run_columns(run, a, b, threads=1)
                                                              for a, b in ranges]),
            "evret read_qrels": ("qrels", lambda: read_qrels(qrels)),
            "evret read_qrels, one shard's queries (a quarter)": ("qrels", lambda: read_qrels(qrels, quarter)),
            "evret read_run (dicts), distinct scores": (DISTINCT, lambda: read_run(distinct, threads=1)),
            f"evret read_run (dicts), distinct scores, {threads} threads": (DISTINCT, lambda: read_run(distinct)),
        }
        if args.columns_only:
            ours = {k: v for k, v in ours.items() if "columns" in k or "shard" in k}
        if threads == 1:  # one CPU: the "N threads" rows would repeat the one-thread rows
            ours = {k: v for k, v in ours.items() if not k.endswith(" 1 threads")}
        rows: dict[str, tuple[str, float, float]] = {}
        for name, (kind, fn) in ours.items():
            rows[name] = (kind, *best(fn, args.repeat))
        if not args.skip_pure and not args.columns_only and trecscan._trecscan is not None:
            os.environ["EVRET_PURE_PYTHON"] = "1"
            try:
                for name in ("evret read_run (dicts)", "evret read_run_columns", "evret read_qrels"):
                    kind, fn = ours[name]
                    rows[name + ", numpy path"] = (kind, *best(fn, args.repeat))
            finally:
                del os.environ["EVRET_PURE_PYTHON"]
        for name, (kind, fn) in ({} if args.columns_only else peers(files)).items():
            rows[name] = (kind, *best(fn, args.repeat))
        if args.cold and not args.columns_only:
            cold_rows(qrels, args.cold)
        load_end = os.getloadavg()[0]
    report(rows, lines, judged, load, load_end)
    return 0


COLD = {
    "evret read_qrels": "from evret_core.io.trec import read_qrels as read",
    "pyarrow read_csv, 1 thread": "import pyarrow.csv as pc\ndef read(p): return pc.read_csv(p, read_options="
                                  "pc.ReadOptions(autogenerate_column_names=True, use_threads=False), "
                                  "parse_options=pc.ParseOptions(delimiter=' '))",
    f"pyarrow read_csv, {os.cpu_count()} threads": "import pyarrow.csv as pc\ndef read(p): return pc.read_csv(p, "
                                  "read_options=pc.ReadOptions(autogenerate_column_names=True, use_threads=True), "
                                  "parse_options=pc.ParseOptions(delimiter=' '))",
    "pytrec_eval parse_qrel": "import pytrec_eval\ndef read(p): return pytrec_eval.parse_qrel(open(p))",
}


def cold_rows(qrels: Path, n: int) -> None:
    """Each reader's first and only read of the qrels in a fresh process (imports done, file in the page cache),
    best of ``n`` processes: wall and CPU time of that one call, taken inside the child."""
    import subprocess

    timer = ("\nimport sys, time\np = sys.argv[1]\nopen(p, 'rb').read()\nw, c = time.perf_counter(), "
             "time.process_time()\nr = read(p)\nprint(time.perf_counter() - w, time.process_time() - c)")
    print(f"\nqrels read once per fresh process, best of {n}:\n\n| reader | wall (ms) | CPU (ms) |\n|---|---|---|")
    for name, code in COLD.items():
        got = []
        for _ in range(n):
            out = subprocess.run([sys.executable, "-c", code + timer, str(qrels)], capture_output=True, text=True)
            if out.returncode:
                print(f"| {name} | - | - (failed: {out.stderr.strip().splitlines()[-1:]}) |")
                break
            got.append([float(x) for x in out.stdout.split()])
        else:
            print(f"| {name} | {min(g[0] for g in got) * 1e3:.1f} | {min(g[1] for g in got) * 1e3:.1f} |")


def report(rows: dict[str, tuple[str, float, float]], lines: int, judged: int, load: float, load_end: float) -> None:
    """The table (ratios against the peers on the same file, same run) and each target of issue 26 part 1."""
    threads = f"{os.cpu_count()} threads"
    print(f"\n| reader | file | wall (s) | CPU (s) | M lines/s (CPU) | vs pyarrow, 1 thread (wall / CPU) | "
          f"vs pyarrow, {threads} (wall) | vs pytrec_eval (wall / CPU) |\n|---|---|---|---|---|---|---|---|")

    def peer(name: str, kind: str) -> tuple[float, float] | None:
        got = rows.get(f"{name} ({kind})")
        return None if got is None else (got[1], got[2])

    def pytrec(kind: str) -> tuple[float, float] | None:
        return peer("pytrec_eval parse_qrel" if kind == "qrels" else "pytrec_eval parse_run", kind)

    checks: list[str] = []
    for name, (kind, wall, cpu) in rows.items():
        n = judged if kind == "qrels" else lines
        one, many, slow = peer("pyarrow read_csv, 1 thread", kind), peer(f"pyarrow read_csv, {threads}", kind), pytrec(kind)
        cells = [f"{one[0] / wall:.2f}x / {one[1] / cpu:.2f}x" if one else "-",
                 f"{many[0] / wall:.2f}x" if many else "-",
                 f"{slow[0] / wall:.2f}x / {slow[1] / cpu:.2f}x" if slow else "-"]
        print(f"| {name} | {kind} | {wall:.3f} | {cpu:.3f} | {n / cpu / 1e6:.2f} | {' | '.join(cells)} |")
        if name.startswith("evret") and name.endswith(" threads") and many:  # against pyarrow on as many, wall
            checks.append(f"- {name} ({kind}): {n / wall / 1e6:.1f}M lines/s wall; vs pyarrow on {threads} "
                          f"{many[0] / wall:.2f}x wall ({'met' if many[0] >= wall else 'NOT met'}: >= 1x)")
        elif name.startswith("evret") and "numpy" not in name:
            rate = n / cpu / 1e6
            line = f"- {name} ({kind}): {rate:.1f}M lines/s CPU ({'met' if rate >= 10 else 'NOT met'}: >= 10M)"
            if one:
                line += (f"; vs pyarrow 1 thread {one[1] / cpu:.2f}x CPU, {one[0] / wall:.2f}x wall "
                         f"({'met' if one[1] >= cpu else 'NOT met'}: >= 1x)")
            if many:
                line += f"; vs pyarrow on {threads} {many[0] / wall:.2f}x wall"
            if slow and kind != "qrels":
                line += f"; vs pytrec_eval {slow[1] / cpu:.2f}x CPU ({'met' if slow[1] >= 3 * cpu else 'NOT met'}: >= 3x)"
            checks.append(line)
    print("\n(ratios: the peer's time on the same file / this row's time; above 1x this row is faster. CPU: this "
          f"process's CPU time, all threads. Load average {load:.2f} at the start, {load_end:.2f} at the end)")
    print("\nTargets (issue 26 part 1), on CPU time:")
    print("\n".join(checks))

if __name__ == "__main__":
    sys.exit(main())
