"""Leaderboard agreement and PPI coverage of a reference-free judge on TREC DL 2019 (passages).

1. ``runs``: nine systems Evret builds over the 10,818 judged DL19 passages (the corpus is converted as
   ``relevance_dl19.py`` does), top 100 for each of the 43 NIST-judged queries, written as TREC runs in the cache
   folder (a rerun reuses them): bm25 at (k1, b) = (0.9, 0.4), (1.2, 0.75), (2.0, 0.9); bm25 without stop-word
   removal or stemming; bm25 on the first 3 query words; dense all-MiniLM-L6-v2 (the packaged model, one thread,
   embeddings saved in the cache folder); RRF(bm25, dense); CombSUM of min-max scores (0.5/0.5); bm25's top 100
   shuffled (seed 0).
2. ``judge``: ``evret judge --depth D`` pools the runs' top D and grades the pool with ``query-similarity``
   (thresholds fitted on the DL19 dev half, docs/benchmarks.md) and, when asked (``--llm-depth``), with
   ``relevance`` on SmolLM2-135M-Instruct (one thread, answers cached: a stopped run resumes).
3. ``agreement``: ``evret agreement --reference NIST --judged JUDGE --run ... --relevance-level 2 --json`` for
   ndcg@10, precision@10 and ap@100, twice: **same pairs** (both files cut to the pool pairs NIST judged, so only
   the grades differ) and **own pool** (the judge's whole pool against all of NIST's qrels; a pair one file lacks
   counts 0 there, as trec_eval does), over all 43 queries and over the 21 test-half queries.
4. ``ppi``: per query nDCG@10 of each system under the judge's own pool (f) and NIST (y); each of ``--reps``
   repetitions draws 43 queries with replacement and labels a random 5 / 10 / 20 of them; coverage of the 95%
   prediction-powered interval (``evret_core.calibration.ppi.ppi_mean``), the labels-only normal interval and the
   judge-only bootstrap interval, of the drawn queries' human mean and of the 43 queries' human mean.

Usage: python benchmarks/leaderboard_dl19.py [runs|judge|agreement|ppi|all] [--cache /tmp/evret-bench]
           [--depth 10] [--llm-depth 0] [--reps 2000]
Prints every command it runs and Markdown tables for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relevance_dl19 import prepare, read_qrels  # noqa: E402  (the same corpus conversion and dev/test split)

REPO = Path(__file__).resolve().parents[1]
THRESHOLDS = [0.4498, 0.5551, 0.6684]  # fitted on the 22 dev queries (docs/benchmarks.md, query-similarity)
METRICS = ["ndcg@10", "precision@10", "ap@100"]
DEPTH = 100
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def run(cmd: list[str], json_out: bool = True) -> Any:
    print("$ " + shlex.join(cmd), flush=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=ONE_THREAD)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    print(f"  ({time.perf_counter() - started:.1f} s; {uptime()})", flush=True)
    return json.loads(done.stdout) if json_out else done.stdout


# -- 1. the systems ------------------------------------------------------------------------------------------
SYSTEMS = ["bm25-0.9-0.4", "bm25-1.2-0.75", "bm25-2.0-0.9", "bm25-nostop-nostem", "bm25-3words", "dense-minilm",
           "rrf-bm25-dense", "combsum-bm25-dense", "bm25-shuffled"]


def build_runs(out: Path, topics: dict[str, str]) -> dict[str, Path]:
    """The nine TREC runs (top 100 of every judged query); each written once, atomically, and reused."""
    import torch
    from evret_bm25.retriever import BM25Retriever
    from evret_sentence_transformers.retriever import DenseRetriever

    from evret_core.io.trec import read_run, write_run
    from evret_core.retrieve.fusion import fuse_runs
    from evret_core.sdk import read_corpus

    torch.set_num_threads(1)
    folder = out / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / f"{name}.run" for name in SYSTEMS}
    qids = sorted(topics)
    corpus_path = out / "corpus.jsonl"
    corpus: dict[str, Any] | None = None

    def save(name: str, ranked: list[list[tuple[str, float]]]) -> None:
        tmp = paths[name].with_suffix(".tmp")
        write_run(tmp, {q: dict(r) for q, r in zip(qids, ranked, strict=True)}, tag=name)
        tmp.replace(paths[name])

    def bm25(name: str, texts: list[str], **options: Any) -> None:
        nonlocal corpus
        if paths[name].exists():
            return
        started = time.perf_counter()
        corpus = corpus or read_corpus(corpus_path)
        retriever = BM25Retriever(corpus, **options)
        save(name, [[(r.doc_id, r.score) for r in results] for results in retriever.batch_retrieve(texts, DEPTH)])
        print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)

    texts = [topics[q] for q in qids]
    bm25("bm25-0.9-0.4", texts, k1=0.9, b=0.4)
    bm25("bm25-1.2-0.75", texts, k1=1.2, b=0.75)
    bm25("bm25-2.0-0.9", texts, k1=2.0, b=0.9)
    bm25("bm25-nostop-nostem", texts, stopwords=None, stemmer=None)
    bm25("bm25-3words", [" ".join(t.split()[:3]) for t in texts])
    if not paths["dense-minilm"].exists():
        started = time.perf_counter()
        dense = DenseRetriever(corpus=corpus_path, embeddings=out / "corpus.minilm.embeddings.npz", batch_size=32)
        ranked = [[(r.doc_id, r.score) for r in results] for results in dense.batch_retrieve(texts, DEPTH)]
        save("dense-minilm", ranked)
        print(f"dense-minilm: {time.perf_counter() - started:.1f} s ({dense.stats()}; {uptime()})", flush=True)
    base, dense_run = read_run(paths["bm25-0.9-0.4"]), read_run(paths["dense-minilm"])
    for name, options in (("rrf-bm25-dense", {"method": "rrf"}),
                          ("combsum-bm25-dense", {"method": "wsum", "norm": "min-max", "weights": [0.5, 0.5]})):
        if not paths[name].exists():
            fused = fuse_runs([base, dense_run], **options)
            save(name, [sorted(fused.get(q, {}).items(), key=lambda kv: -kv[1])[:DEPTH] for q in qids])
    if not paths["bm25-shuffled"].exists():
        rng = np.random.default_rng(0)
        shuffled = []
        for q in qids:
            docs = sorted(base.get(q, {}), key=lambda d: -base[q][d])
            order = rng.permutation(len(docs))
            shuffled.append([(docs[i], float(len(docs) - rank)) for rank, i in enumerate(order)])
        save("bm25-shuffled", shuffled)
    return paths


# -- 2. the judged pools -------------------------------------------------------------------------------------
def judge_pool(out: Path, paths: dict[str, Path], name: str, depth: int, options: list[str]) -> tuple[Path, Any]:
    """``evret judge`` over every run at ``depth``; the qrels and the summary are kept (a rerun replays the
    judge's cache)."""
    qrels = out / f"pool-{name}-depth{depth}.qrels"
    cmd = ["evret", "judge", "--queries", str(out / "judged-queries.tsv"), "--corpus",
           str(out / "corpus.jsonl"), "--depth", str(depth), "--judge", JUDGE_NAMES[name]]
    for option in options:
        cmd += ["--judge-option", option]
    for path in paths.values():
        cmd += ["--run", str(path)]
    summary = run(cmd + ["-o", str(qrels), "--json", "--no-progress"])
    print(json.dumps({k: summary.get(k) for k in ("pairs", "distinct", "judged", "unmeasured", "histogram", "cost")},
                     default=str), flush=True)
    return qrels, summary


JUDGE_NAMES = {"query-similarity": "query-similarity", "relevance-smollm2": "relevance"}
JUDGES = {
    "query-similarity": ["thresholds=" + json.dumps(THRESHOLDS), "cache={cache}/embeddings.sqlite",
                         "batch_size=32"],
    "relevance-smollm2": ["provider=transformers", "model=smollm2-135m", 'provider_options={"threads": 1}',
                          "cache={cache}/relevance-pool-cache.sqlite"],
}


# -- 3. leaderboard agreement --------------------------------------------------------------------------------
def qrels_rows(rows: list[tuple[str, str, int]], keep: set[tuple[str, str]] | None = None,
               queries: set[str] | None = None) -> str:
    return "".join(f"{q} 0 {d} {g}\n" for q, d, g in rows
                   if (keep is None or (q, d) in keep) and (queries is None or q in queries))


def comparisons(out: Path, nist: list[tuple[str, str, int]], judged: Path, test: set[str]) -> dict[str, tuple[Path, Path]]:
    """(reference, judged) qrels files: same pairs / own pool, all 43 queries / the 21 test-half queries."""
    pool = read_qrels(judged)
    both = {(q, d) for q, d, _ in pool} & {(q, d) for q, d, _ in nist}
    files = {}
    for scope, queries in (("all", None), ("test", test)):
        for how in ("same-pairs", "own-pool"):
            ref, jud = out / f"{judged.stem}.{how}.{scope}.reference.qrels", out / f"{judged.stem}.{how}.{scope}.qrels"
            keep = both if how == "same-pairs" else None
            ref.write_text(qrels_rows(nist, keep, queries), encoding="utf-8")
            jud.write_text(qrels_rows(pool, keep, queries), encoding="utf-8")
            files[f"{how}, {scope}"] = (ref, jud)
    return files


def figure(entry: Any) -> str:
    if entry is None or entry.get("value") is None:
        return "n/a"
    low, high = entry.get("interval") or (None, None)
    if low is None:
        return f"{entry['value']:.3f}"
    return f"{entry['value']:.3f} [{low:.3f}, {high:.3f}]"


def agreement(out: Path, paths: dict[str, Path], nist: list[tuple[str, str, int]], judged: Path,
              test: set[str], title: str) -> None:
    rows = []
    for label, (ref, jud) in comparisons(out, nist, judged, test).items():
        cmd = ["evret", "agreement", "--reference", str(ref), "--judged", str(jud),
               "--relevance-level", "2", "--seed", "0", "--json"]
        for name, path in paths.items():
            cmd += ["--run", f"{name}={path}"]
        for metric in METRICS:
            cmd += ["--metric", metric]
        got = run(cmd)
        (out / f"{judged.stem}.{label.replace(', ', '.')}.agreement.json").write_text(json.dumps(got, indent=1))
        print(f"{title}, {label}: pairs {got['pairs']} over {got['queries']} queries, only_reference "
              f"{got['only_reference']}, only_judged {got['only_judged']}; kappa {figure(got['cohen_kappa'])}, "
              f"alpha {figure(got['krippendorff_alpha'])}, binary@2 {figure(got['binary']['2']['kappa'])}",
              flush=True)
        for metric in METRICS:
            board = got["leaderboard"][metric]
            rows.append(f"| {label} | {metric} | {figure(board['kendall_tau'])} | {figure(board['tau_ap'])} | "
                        f"{figure(board['spearman_rho'])} | {figure(board['swap_rate'])} | {board['ties']} |")
            if label == "own-pool, all" or label == "same-pairs, all":
                scores = ", ".join(f"{s['run']} {s['reference']:.4f}/{s['judged']:.4f}" for s in board["systems"])
                print(f"  {label} {metric} (NIST/judge): {scores}", flush=True)
    print(f"\n#### {title}\n\n| comparison | metric | Kendall tau | tau_AP | Spearman rho | swap rate | ties |\n"
          "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n", flush=True)


# -- 4. PPI coverage -----------------------------------------------------------------------------------------
def per_query(qrels_path: Path, paths: dict[str, Path], qids: list[str]) -> np.ndarray:
    """nDCG@10 per query (rows) and system (columns), trec_eval -c semantics over ``qids``."""
    from evret_core.io.trec import read_qrels as read_qrels_dict
    from evret_core.io.trec import read_run
    from evret_core.metrics.engine import evaluate_run

    qrels = read_qrels_dict(qrels_path)
    values = np.zeros((len(qids), len(paths)))
    for s, path in enumerate(paths.values()):
        scores = evaluate_run(qrels, read_run(path), ["ndcg@10"], per_query=True, relevance_level=2, complete=True)
        for i, q in enumerate(qids):
            values[i, s] = scores.get(q, {}).get("ndcg@10", 0.0)
    return values


def ppi_coverage(y: np.ndarray, f: np.ndarray, reps: int, seed: int, labelled: tuple[int, ...] = (5, 10, 20),
                 boot: int = 500) -> list[dict[str, Any]]:
    """Per system: each rep draws the 43 queries with replacement and labels a random n of them."""
    from evret_core.calibration.ppi import ppi_mean

    z = 1.959963984540054
    rng = np.random.default_rng(seed)
    size = len(y)
    rows = []
    for s in range(y.shape[1]):
        population = float(y[:, s].mean())
        tally: dict[str, float] = defaultdict(float)
        for _ in range(reps):
            idx = rng.integers(0, size, size=size)
            fs, ys = f[idx, s], y[idx, s]
            drawn = float(ys.mean())
            means = fs[rng.integers(0, size, size=(boot, size))].mean(axis=1)
            low, high = np.percentile(means, [2.5, 97.5])
            tally["judge_drawn"] += low <= drawn <= high
            tally["judge_population"] += low <= population <= high
            tally["judge_width"] += high - low
            for n in labelled:
                pick = rng.choice(size, size=n, replace=False)
                est = ppi_mean(fs, ys[pick], fs[pick], value_range=(0.0, 1.0))
                lo, hi = est.interval
                tally[f"ppi_drawn_{n}"] += lo <= drawn <= hi
                tally[f"ppi_population_{n}"] += lo <= population <= hi
                tally[f"ppi_width_{n}"] += hi - lo
                mean, half = ys[pick].mean(), z * ys[pick].std(ddof=1) / np.sqrt(n)
                tally[f"labels_drawn_{n}"] += abs(mean - drawn) <= half
                tally[f"labels_population_{n}"] += abs(mean - population) <= half
                tally[f"labels_width_{n}"] += 2 * half
        rows.append({"system": s, "truth": population, "judged": float(f[:, s].mean()),
                     **{k: v / reps for k, v in tally.items()}})
    return rows


def ppi_section(out: Path, paths: dict[str, Path], nist: Path, judged: Path, qids: list[str], reps: int,
                seed: int) -> None:
    started = time.perf_counter()
    y, f = per_query(nist, paths, qids), per_query(judged, paths, qids)
    rows = ppi_coverage(y, f, reps, seed)
    names = list(paths)
    print(f"\n#### PPI coverage, judge qrels {judged.name}: {len(qids)} queries, {reps} repetitions, "
          f"{time.perf_counter() - started:.0f} s ({uptime()})\n")
    print("| system | NIST nDCG@10 | judge nDCG@10 | labelled | PPI coverage (drawn / all 43) | PPI width | "
          "labels-only coverage (drawn / all 43) | labels-only width | judge-only coverage (drawn / all 43) |")
    print("|---|---|---|---|---|---|---|---|---|")
    keys = ("ppi_drawn", "ppi_population", "labels_drawn", "labels_population")
    mean_rows: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        for n in (5, 10, 20):
            print(f"| {names[r['system']]} | {r['truth']:.4f} | {r['judged']:.4f} | {n} | {r[f'ppi_drawn_{n}']:.3f} / "
                  f"{r[f'ppi_population_{n}']:.3f} | {r[f'ppi_width_{n}']:.3f} | {r[f'labels_drawn_{n}']:.3f} / "
                  f"{r[f'labels_population_{n}']:.3f} | {r[f'labels_width_{n}']:.3f} | {r['judge_drawn']:.3f} / "
                  f"{r['judge_population']:.3f} |")
            for key in (*keys, "ppi_width", "labels_width"):
                mean_rows.setdefault((key, n), []).append(r[f"{key}_{n}"])
    print("\nmean over the systems: " + "; ".join(
        f"n={n}: PPI {np.mean(mean_rows[('ppi_drawn', n)]):.3f} / {np.mean(mean_rows[('ppi_population', n)]):.3f} "
        f"(width {np.mean(mean_rows[('ppi_width', n)]):.3f}), labels-only "
        f"{np.mean(mean_rows[('labels_drawn', n)]):.3f} / {np.mean(mean_rows[('labels_population', n)]):.3f} "
        f"(width {np.mean(mean_rows[('labels_width', n)]):.3f})" for n in (5, 10, 20))
        + f"; judge-only {np.mean([r['judge_drawn'] for r in rows]):.3f} / "
          f"{np.mean([r['judge_population'] for r in rows]):.3f} (width {np.mean([r['judge_width'] for r in rows]):.3f})",
        flush=True)
    json_rows = [{**r, "system": names[r["system"]]} for r in rows]
    (out / f"{judged.stem}.ppi.json").write_text(json.dumps(json_rows, indent=1), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", nargs="?", choices=["runs", "judge", "agreement", "ppi", "all"], default="all")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/evret-bench"))
    parser.add_argument("--depth", type=int, default=10, help="query-similarity's pool depth")
    parser.add_argument("--llm-depth", type=int, default=0, help="relevance (SmolLM2) pool depth; 0: skip")
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"$ uptime\n{uptime()}", flush=True)
    out = args.cache / "dl19"
    files = prepare(args.shared / "datasets" / "trec-dl-2019", out)
    qids = sorted({q for q, _, _ in files["qrels"]})
    topics = {}
    for half in ("dev", "test"):
        topics.update(dict(line.split("\t", 1) for line in files[half][0].read_text(encoding="utf-8").splitlines()))
    (out / "judged-queries.tsv").write_text("".join(f"{q}\t{topics[q]}\n" for q in qids), encoding="utf-8")
    nist_path = args.shared / "datasets" / "trec-dl-2019" / "qrels-pass.txt"
    paths = build_runs(out, topics)
    if args.part == "runs":
        return
    pools = [("query-similarity", args.depth)] + ([("relevance-smollm2", args.llm_depth)] if args.llm_depth else [])
    for name, depth in pools:
        options = [o.replace("{cache}", str(out)) for o in JUDGES[name]]
        judged = out / f"pool-{name}-depth{depth}.qrels"
        if args.part in ("judge", "all") or not judged.exists():
            judged, _ = judge_pool(out, paths, name, depth, options)
        if args.part in ("agreement", "all"):
            agreement(out, paths, files["qrels"], judged, files["halves"]["test"], f"{name}, pool depth {depth}")
        if args.part in ("ppi", "all"):
            ppi_section(out, paths, nist_path, judged, qids, args.reps, args.seed)


if __name__ == "__main__":
    main()
