"""Results files at scale (red team 2026-11-28, F13): `evret evaluate`, `evret report --format html` and
`evret compare` of a 200,000-query run, with this checkout's code and with an earlier commit's, in the same run.

The case is the red team's LG1: a dataset of N queries labelled by ids (two relevant documents each), a
precomputed TREC run of 10 documents per query (one relevant document at rank 3), and three metrics::

    evret evaluate --dataset ds.jsonl --run run.trec --metric recall@10 --metric ndcg@10 --metric mrr@10 \\
        --output out.json
    evret report out.json --format html --output report.html
    evret compare out.json out.json

Each command runs under ``/usr/bin/time -v`` (wall time and peak resident memory of the whole process), once per
version and ``--repeat`` times, alternating versions. The earlier version is ``git archive REF`` unpacked in the
work folder with the compiled extensions copied in (``--so-from``), run with ``PYTHONPATH`` pointing at it; both
versions report and compare the same results file (the one this checkout wrote). The script checks that the two
versions agree: the evaluations' files equal but for their time stamps, the reports' drill-down data equal, the
comparisons' output equal.

    python benchmarks/results_scale.py [--queries 200000] [--before main] [--repeat 1] [--so-from DIR]
        [--work /tmp/evret-results-scale] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = ["recall@10", "ndcg@10", "mrr@10"]


def generate(folder: Path, queries: int) -> tuple[Path, Path]:
    """The dataset and the TREC run of the case (written in blocks: a few seconds for 200,000 queries)."""
    dataset, run = folder / "ds.jsonl", folder / "run.trec"
    with dataset.open("w", encoding="utf-8") as ds, run.open("w", encoding="utf-8") as rn:
        for start in range(0, queries, 10_000):
            block = range(start, min(queries, start + 10_000))
            ds.write("".join(f'{{"query_id": "q{i:07d}", "query": "question {i}", "relevant_doc_ids": '
                             f'["d{i:07d}_a", "d{i:07d}_b"]}}\n' for i in block))
            rn.write("".join(f"q{i:07d} Q0 d{i:07d}_{'a' if rank == 3 else rank} {rank} {20 - rank}.0 bench\n"
                             for i in block for rank in range(1, 11)))
    return dataset, run


def unpack(ref: str, folder: Path, so_from: Path) -> Path:
    """``git archive REF`` in ``folder``, with the compiled extensions found under ``so_from`` copied in, each
    next to its C source in the unpacked tree (an extension's folder may differ between versions)."""
    target = folder / f"before-{re.sub(r'[^A-Za-z0-9_.-]', '_', ref)}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir()
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", ref], cwd=ROOT, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(target, filter="data")
    for lib in so_from.rglob("*.so"):
        for source in (target / "evret_core").rglob(f"{lib.name.split('.')[0]}.c"):
            shutil.copy(lib, source.parent / lib.name)
    return target


def environment(code: Path) -> dict[str, str]:
    """The environment that runs ``code``'s evret_core and plugins (checked: an editable install elsewhere must not
    win)."""
    plugins = [str(p) for p in sorted((code / "plugins").glob("*")) if p.is_dir()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), *plugins])}
    where = subprocess.run([sys.executable, "-c", "import evret_core; print(evret_core.__file__)"], env=env,
                           cwd=code, capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"evret_core comes from {where}, not from {code}")
    return env


def timed(code: Path, argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in GB, stdout) of ``evret ARGV`` with ``code`` first on the path."""
    env = environment(code)
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "evret_core.cli", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}):\n{done.stderr[-3000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert wall and rss, done.stderr[-2000:]
    seconds = sum(float(part) * 60 ** i for i, part in enumerate(reversed(wall.group(1).split(":"))))
    return seconds, int(rss.group(1)) / 1e6, done.stdout


def load() -> str:
    """The 1, 5 and 15 minute load averages (the machine is shared: say how busy it was)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"


def drilldown(page: Path) -> str:
    found = re.search(r'<script type="application/json" id="evret-data">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)
    assert found, page
    return found.group(1)


def same_results(a: Path, b: Path) -> bool:
    """The two results files hold the same, but for when they were made and how long it took."""
    def strip(path: Path) -> dict[str, object]:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["manifest"].pop("created_at", None)
        data["stats"].pop("elapsed_s", None)
        return data  # type: ignore[no-any-return]
    return strip(a) == strip(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--before", default="main", help="the earlier version: a git ref (default main)")
    parser.add_argument("--so-from", type=Path, default=ROOT / "evret_core",
                        help="folder of the compiled extensions (*.so, searched below it) to copy into the earlier "
                             "version")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "evret-results-scale")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at the start: {load()}", flush=True)
    dataset, run = generate(args.work, args.queries)
    before = unpack(args.before, args.work, args.so_from)
    versions = {"after": ROOT, "before": before}
    evaluate = ["evaluate", "--dataset", dataset.name, "--run", run.name, *[x for m in METRICS for x in ("--metric", m)],
                "--no-progress", "--output"]
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for repeat in range(args.repeat):
        for name, code in versions.items():  # this checkout first: its file is the one both versions read
            out = args.work / f"out-{name}.json"
            rows.setdefault(("evaluate", name), []).append(timed(code, [*evaluate, out.name], args.work)[:2])
            print(f"evaluate {name}: {rows['evaluate', name][-1]}", flush=True)
        shared = args.work / "out-after.json"
        if repeat == 0:
            print(f"results file: {shared.stat().st_size / 1e6:.1f} MB; the two versions' files equal but for "
                  f"their time stamps: {same_results(shared, args.work / 'out-before.json')}", flush=True)
        outputs: dict[str, str] = {}
        for name, code in versions.items():
            page = args.work / f"report-{name}.html"
            rows.setdefault(("report", name), []).append(
                timed(code, ["report", shared.name, "--format", "html", "--output", page.name], args.work)[:2])
            print(f"report {name}: {rows['report', name][-1]}", flush=True)
            seconds, rss, outputs[name] = timed(code, ["compare", shared.name, shared.name], args.work)
            rows.setdefault(("compare", name), []).append((seconds, rss))
            print(f"compare {name}: {rows['compare', name][-1]}", flush=True)
        if repeat == 0:
            pages = [drilldown(args.work / f"report-{name}.html") for name in versions]
            print(f"drill-down data equal: {pages[0] == pages[1]}; comparison output equal: "
                  f"{outputs['after'] == outputs['before']}", flush=True)
    print(f"load average at the end: {load()}")
    print(f"\n{args.queries:,} queries, {len(METRICS)} metrics; best of {args.repeat}; before = {args.before}")
    print("| command | before (s) | after (s) | time after/before | before peak RSS (GB) | after peak RSS (GB) "
          "| RSS after/before |")
    print("|---|---|---|---|---|---|---|")
    for command in ("evaluate", "report", "compare"):
        b_time, b_rss = min(t for t, _ in rows[command, "before"]), min(r for _, r in rows[command, "before"])
        a_time, a_rss = min(t for t, _ in rows[command, "after"]), min(r for _, r in rows[command, "after"])
        print(f"| {command} | {b_time:.1f} | {a_time:.1f} | {a_time / b_time:.2f}x | {b_rss:.2f} | {a_rss:.2f} "
              f"| {a_rss / b_rss:.2f}x |")
    if not args.keep:
        shutil.rmtree(args.work)


if __name__ == "__main__":
    main()
