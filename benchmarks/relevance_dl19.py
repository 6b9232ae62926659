"""Reference-free judges against NIST's grades on TREC DL 2019 (passages): label agreement on a held-out half.

1. The 43 judged queries are split deterministically (sorted qids, alternate: even positions dev, odd test); the
   corpus (``docid``/``doc``) is converted once into Evret's corpus JSONL (``_id``/``text``) in the cache folder.
2. ``query-similarity`` (evret-sentence-transformers, offline MiniLM): ``evret calibrate`` fits the three cut
   thresholds on the dev half, then ``evret calibrate`` with those thresholds grades every test-half pair and
   reports the label agreement (exact, Cohen's and weighted kappas, Krippendorff's alpha, binary kappa per cut,
   intervals over queries).
3. ``relevance`` on a packaged model (provider ``transformers``, one thread; ``--model smollm2-135m``, the default,
   or ``gemma3-270m``, the base model: plain prompt format, constrained decoding): a sample of the test half
   stratified by NIST grade (``--sample-size`` per grade, round-robin over queries, so a smaller sample is a subset
   of a larger one), written as a run whose ranks follow that round-robin order and graded by ``evret judge``
   (pairs best rank first: a stopped run holds a smaller stratified sample), once per ``--fencing``. Every answer
   is cached (SQLite in the cache folder, one file per model), so a rerun sends nothing. ``evret agreement`` then
   compares the judge's qrels with NIST's, and the same figures are printed reweighted to the test half's grade
   shares (a grade-stratified sample's own kappa is not the population's).

Usage: python benchmarks/relevance_dl19.py [--shared ../shared] [--cache /tmp/evret-bench] [--sample-size 40]
           [--model smollm2-135m] [--fencing nonce --fencing plain] [--skip-llm] [--skip-similarity]
Prints every command it runs and the JSON it got back, for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GRADES = (0, 1, 2, 3)
#: query-similarity's thresholds as ``evret calibrate`` fitted them on the dev half (docs/benchmarks.md)
SIMILARITY_THRESHOLDS = [0.4498, 0.5551, 0.6684]


def read_qrels(path: Path) -> list[tuple[str, str, int]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            qid, _, docid, grade = line.split()
            rows.append((qid, docid, int(grade)))
    return rows


def write_qrels(path: Path, rows: list[tuple[str, str, int]]) -> None:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows), encoding="utf-8")


def prepare(data: Path, out: Path) -> dict[str, Any]:
    """Corpus conversion, dev/test split, topics and qrels files of both halves."""
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.jsonl"
    if not corpus.exists():
        tmp = corpus.with_suffix(".tmp")
        with (data / "passages.jsonl").open(encoding="utf-8") as src, tmp.open("w", encoding="utf-8") as dst:
            for line in src:
                if line.strip():
                    row = json.loads(line)
                    dst.write(json.dumps({"_id": str(row["docid"]), "text": row["doc"]}) + "\n")
        tmp.replace(corpus)
    qrels = read_qrels(data / "qrels-pass.txt")
    qids = sorted({q for q, _, _ in qrels})
    halves = {"dev": set(qids[0::2]), "test": set(qids[1::2])}
    topics = dict(line.split("\t", 1) for line in (data / "queries.tsv").read_text(encoding="utf-8").splitlines()
                  if line.strip())
    files: dict[str, Any] = {"corpus": corpus, "qrels": qrels, "halves": halves}
    for name, keep in halves.items():
        (out / f"{name}-queries.tsv").write_text("".join(f"{q}\t{topics[q]}\n" for q in sorted(keep)),
                                                 encoding="utf-8")
        write_qrels(out / f"{name}-qrels.txt", [r for r in qrels if r[0] in keep])
        files[name] = (out / f"{name}-queries.tsv", out / f"{name}-qrels.txt")
    return files


def stratified(rows: list[tuple[str, str, int]], per_grade: int) -> list[tuple[str, str, int]]:
    """Per grade, ``per_grade`` pairs taken round-robin over the queries (sorted qids, docids in qrels order)."""
    picked = []
    for grade in GRADES:
        by_query: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
        for row in rows:
            if row[2] == grade:
                by_query[row[0]].append(row)
        queues = [by_query[q] for q in sorted(by_query)]
        taken: list[tuple[str, str, int]] = []
        depth = 0
        while len(taken) < per_grade and any(depth < len(q) for q in queues):
            for queue in queues:
                if depth < len(queue) and len(taken) < per_grade:
                    taken.append(queue[depth])
            depth += 1
        picked.extend(taken)
    return picked


def run(cmd: list[str]) -> dict[str, Any]:
    print("$ " + " ".join(cmd), flush=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def calibrate(topics: Path, qrels: Path, corpus: Path, judge: str, options: list[str]) -> dict[str, Any]:
    cmd = ["nice", "-n", "10", "evret", "calibrate", "--queries", str(topics), "--qrels", str(qrels),
           "--corpus", str(corpus), "--judge", judge]
    for option in options:
        cmd += ["--judge-option", option]
    return run(cmd + ["--seed", "0", "--json"])


def interval(value: Any, bounds: Any) -> str:
    if value is None:
        return "n/a"
    if not bounds or bounds[0] is None:
        return f"{value:.3f}"
    return f"{value:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]"


def report(title: str, result: dict[str, Any], judge: str) -> None:
    graded = result["graded"]
    entry = graded[judge] if isinstance(graded, dict) else next(g for g in graded if g.get("judge") == judge)
    print(f"\n### {title}\n")
    print("```json")
    print(json.dumps({"labels": result["labels"], "agreement": entry["agreement"],
                      "unmeasured": entry.get("unmeasured"), "stats": entry.get("stats")}, indent=1, default=str))
    print("```", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/evret-bench"))
    parser.add_argument("--sample-size", type=int, default=40, help="relevance: pairs per NIST grade")
    parser.add_argument("--skip-llm", action="store_true", help="measure query-similarity only")
    parser.add_argument("--skip-similarity", action="store_true", help="measure the relevance judge only")
    parser.add_argument("--model", default="smollm2-135m", help="relevance: the transformers provider's model "
                        "(smollm2-135m, gemma3-270m)")
    parser.add_argument("--fencing", action="append", choices=("nonce", "plain"),
                        help="relevance: the fencing to measure (repeatable; default nonce and plain)")
    parser.add_argument("--cached-only", action="store_true", help="relevance: grade only the sample's pairs the "
                        "cache answers (a stopped run's; no model call)")
    parser.add_argument("--sample-similarity", action="store_true", help="also grade the sample with "
                        "query-similarity (the fitted thresholds), to check the reweighting against the whole half")
    parser.add_argument("--max-batch", type=int, help="relevance: the provider's max_batch (not in the cache key; "
                        "1 caches every answer as it comes)")
    args = parser.parse_args()
    print("$ uptime\n" + subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout, flush=True)
    out = args.cache / "dl19"
    files = prepare(args.shared / "datasets" / "trec-dl-2019", out)
    corpus = files["corpus"]
    test_rows = [r for r in files["qrels"] if r[0] in files["halves"]["test"]]
    print(f"dev: {len(files['halves']['dev'])} queries, {len(files['qrels']) - len(test_rows)} pairs; test: {len(files['halves']['test'])} queries, "
          f"{len(test_rows)} pairs, NIST grades {dict(sorted(Counter(g for _, _, g in test_rows).items()))}")

    if not args.skip_similarity:
        similarity(files, corpus)
    if args.skip_llm:
        return
    relevance(out, files, corpus, test_rows, args.sample_size, args.model, args.fencing or ["nonce", "plain"],
              args.max_batch, args.cached_only, args.sample_similarity)


def similarity(files: dict[str, Any], corpus: Path) -> None:
    dev = calibrate(files["dev"][0], files["dev"][1], corpus, "query-similarity", ["thresholds=[0,0,0]"])
    graded = dev["graded"]
    entry = graded["query-similarity"] if isinstance(graded, dict) else graded[0]
    fitted = entry.get("fitted_thresholds") or entry.get("fit", {}).get("fitted_thresholds")
    print(f"fitted on dev: {fitted}", flush=True)
    test = calibrate(files["test"][0], files["test"][1], corpus, "query-similarity", [f"thresholds={json.dumps(fitted)}"])
    report(f"query-similarity, thresholds {fitted} (dev half), test half", test, "query-similarity")


def sample_run(rows: list[tuple[str, str, int]], sample: list[tuple[str, str, int]]) -> str:
    """The sample as a TREC run: per query, its pairs in the sample's round-robin order (depth, then grade, the
    grades rotated by the query's position), so ``evret judge`` (best rank first) grades every grade's first pairs
    first, the four grades alternating over the queries, and a stopped run holds a nearly grade-balanced sample."""
    depth: dict[tuple[str, str], int] = {}
    for grade in GRADES:
        seen: Counter[str] = Counter()
        for qid, docid, g in rows:
            if g == grade:
                depth[(qid, docid)] = seen[qid]
                seen[qid] += 1
    by_query: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for qid, docid, grade in sample:
        by_query[qid].append((depth[(qid, docid)], grade, docid))
    lines = []
    for position, qid in enumerate(sorted(by_query)):
        ranked = sorted(by_query[qid], key=lambda item: (item[0], (item[1] - position) % len(GRADES), item[2]))
        lines += [f"{qid} Q0 {docid} {rank} {len(ranked) - rank + 1} sample" for rank, (_, _, docid) in
                  enumerate(ranked, start=1)]
    return "\n".join(lines) + "\n"


def cache_name(model: str) -> str:
    """SmolLM2's answers stay in the file the 160-pair sample filled; another model gets its own file."""
    return "relevance-cache.sqlite" if model == "smollm2-135m" else f"relevance-{model}-cache.sqlite"


def relevance(out: Path, files: dict[str, Any], corpus: Path, test_rows: list[tuple[str, str, int]],
              sample_size: int, model: str, fencings: list[str], max_batch: int | None = None,
              cached_only: bool = False, with_similarity: bool = False) -> None:
    """Grade the stratified sample with ``evret judge`` (the sample as a run, every answer cached) and compare
    the judge's qrels with NIST's through ``evret agreement``; then the figures reweighted to the test half's
    grade shares. ``cached_only``: only the pairs whose answers the cache holds (a stopped run's, no model call).
    ``with_similarity``: the same for query-similarity (fitted thresholds), whose figures on the whole test half
    are known, to check the reweighting."""
    sample = stratified(test_rows, sample_size)
    sample_qrels = out / f"test-sample-{sample_size}-qrels.txt"
    write_qrels(sample_qrels, sample)
    run_file = out / f"test-sample-{sample_size}.run"
    run_file.write_text(sample_run(test_rows, sample), encoding="utf-8")
    print(f"\nrelevance sample: {len(sample)} pairs over {len({q for q, _, _ in sample})} queries "
          f"(at most {max(Counter(q for q, _, _ in sample).values())} a query)", flush=True)
    population = Counter(g for _, _, g in test_rows)
    if with_similarity:
        grade_sample(files, corpus, run_file, "query-similarity",
                     [f"thresholds={json.dumps(SIMILARITY_THRESHOLDS)}", f"cache={out / 'embeddings.sqlite'}"],
                     out / f"test-sample-{sample_size}-query-similarity.qrels", sample_qrels, population)
    for fencing in fencings:
        provider_options: dict[str, int] = {"threads": 1} if max_batch is None else {"threads": 1,
                                                                                      "max_batch": max_batch}
        options = ["provider=transformers", f"model={model}", f"provider_options={json.dumps(provider_options)}",
                   f"fencing={fencing}", f"cache={out / cache_name(model)}"]
        judged = out / f"test-sample-{sample_size}-{model}-{fencing}.qrels"
        pairs_run = run_file
        if cached_only:
            pairs_run = out / f"test-sample-{sample_size}-{model}-{fencing}-cached.run"
            pairs_run.write_text(cached_part(run_file, files["test"][0], corpus, model, fencing,
                                             out / cache_name(model)), encoding="utf-8")
            judged = judged.with_suffix(".cached.qrels")
        grade_sample(files, corpus, pairs_run, "relevance", options, judged, sample_qrels, population)


def cached_part(run_file: Path, topics: Path, corpus: Path, model: str, fencing: str, cache: Path) -> str:
    """The lines of ``run_file`` whose (query, passage) the relevance judge's cache answers (same key as
    ``evret judge``), in their order; the count per NIST grade is printed by the agreement."""
    import sqlite3

    from evret_core import create_judge
    from evret_core.contracts.judge import JudgmentContext
    from evret_core.io.corpus import read_corpus
    from evret_core.io.trec import read_topics

    texts, docs = read_topics(topics), read_corpus(corpus)
    judge: Any = create_judge("relevance", provider="transformers", model=model, provider_options={"threads": 1},
                         fencing=fencing, cache=str(cache))
    with sqlite3.connect(cache) as db:
        have = {key for (key,) in db.execute("select key from judgments")}
    kept = [line for line in run_file.read_text(encoding="utf-8").splitlines() if judge.cache_key(JudgmentContext(
        query=texts[line.split()[0]], expected_text="", retrieved_text=str(docs[line.split()[2]]["text"]))) in have]
    print(f"cached: {len(kept)} of the run's pairs", flush=True)
    return "".join(line + "\n" for line in kept)


def grade_sample(files: dict[str, Any], corpus: Path, run_file: Path, judge: str, options: list[str], judged: Path,
                 sample_qrels: Path, population: Counter[int]) -> None:
    """``evret judge`` on the sample's run (a dry run first: what the cache holds), ``evret agreement`` against
    NIST's grades of the sample, and the reweighted figures."""
    depth = max(Counter(line.split()[0] for line in run_file.read_text(encoding="utf-8").splitlines()).values())
    base = ["nice", "-n", "10", "evret", "judge", "--queries", str(files["test"][0]), "--corpus", str(corpus),
            "--run", str(run_file), "--depth", str(depth), "--judge", judge]
    for option in options:
        base += ["--judge-option", option]
    if judge == "relevance":
        plan = run(base + ["--dry-run", "--json"])
        print(json.dumps(plan, indent=1, default=str), flush=True)
    started = time.perf_counter()
    summary = run(base + ["--no-progress", "-o", str(judged), "--json"])
    elapsed = time.perf_counter() - started
    print(json.dumps(summary, indent=1, default=str), flush=True)
    calls = sum(int(cost.get("calls", 0)) for cost in summary.get("cost", {}).values())
    if calls:
        print(f"{calls} model calls in {elapsed:.0f} s: {elapsed / calls:.1f} s a call "
              f"(model load and first constrained call included)", flush=True)
    result = run(["evret", "agreement", "--reference", str(sample_qrels), "--judged", str(judged),
                  "--seed", "0", "--json"])
    print(f"\n### {judge} ({judged.name}) against NIST's grades of the sample\n")
    print("```json\n" + json.dumps(result, indent=1, default=str) + "\n```", flush=True)
    reweighted(sample_qrels, judged, population)


def reweighted(reference: Path, judged: Path, population: Counter[int], resamples: int = 1000) -> None:
    """The label agreement of ``evret agreement`` with every pair weighted by its NIST grade's share of the test
    half over its share of the sample (the stratified-sample estimator of the whole half's figures): the per-query
    confusion rows scaled by those weights, the same formulas and query bootstrap (1,000 resamples, seed 0)."""
    import numpy as np

    from evret_core.calibration.qrels_agreement import label_agreement, pair_table, query_weights
    from evret_core.io.trec import read_qrels as read_qrels_dict

    table = pair_table(read_qrels_dict(reference), read_qrels_dict(judged))
    rows = table.per_query.sum(axis=(0, 2))
    total = sum(population.values())
    scale = np.array([population[int(g)] / total / (rows[i] / rows.sum()) for i, g in enumerate(table.labels)])
    table.per_query = table.per_query * scale[None, :, None]
    result = label_agreement(table, query_weights(len(table.queries), resamples, 0), 0.95)
    weighted = table.per_query.sum(axis=0)
    result["confusion"]["matrix"] = np.round(weighted, 1).tolist()
    result["pairs"] = float(weighted.sum())
    for entry in result["binary"].values():
        entry.pop("confusion")
        entry.pop("reference_positive")
        entry.pop("judged_positive")
    print(f"\nreweighted to the test half's grade shares {dict(sorted(population.items()))} (row weights "
          f"{[round(float(w), 3) for w in scale]}; the sample's {int(rows.sum())} pairs keep their total weight):")
    print("```json\n" + json.dumps(result, indent=1, default=str) + "\n```", flush=True)


if __name__ == "__main__":
    main()
