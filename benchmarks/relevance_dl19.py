"""Reference-free judges against NIST's grades on TREC DL 2019 (passages): label agreement on a held-out half.

1. The 43 judged queries are split deterministically (sorted qids, alternate: even positions dev, odd test); the
   corpus (``docid``/``doc``) is converted once into Evret's corpus JSONL (``_id``/``text``) in the cache folder.
2. ``query-similarity`` (evret-sentence-transformers, offline MiniLM): ``evret calibrate`` fits the three cut
   thresholds on the dev half, then ``evret calibrate`` with those thresholds grades every test-half pair and
   reports the label agreement (exact, Cohen's and weighted kappas, Krippendorff's alpha, binary kappa per cut,
   intervals over queries).
3. ``relevance`` on SmolLM2-135M-Instruct (provider ``transformers``, one thread): a sample of the test half
   stratified by NIST grade (``--sample-size`` per grade, round-robin over queries), graded with both fencings
   through ``evret calibrate`` on a qrels file holding exactly those pairs. Every answer is cached (SQLite in the
   cache folder), so a rerun sends nothing. A grade-stratified sample's kappa is not the population's.

Usage: python benchmarks/relevance_dl19.py [--shared ../shared] [--cache /tmp/evret-bench] [--sample-size 40]
           [--skip-llm] [--skip-similarity]
Prints every command it runs and the figures as Markdown tables for docs/benchmarks.md.
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
    relevance(out, files, corpus, test_rows, args.sample_size)


def similarity(files: dict[str, Any], corpus: Path) -> None:
    dev = calibrate(files["dev"][0], files["dev"][1], corpus, "query-similarity", ["thresholds=[0,0,0]"])
    graded = dev["graded"]
    entry = graded["query-similarity"] if isinstance(graded, dict) else graded[0]
    fitted = entry.get("fitted_thresholds") or entry.get("fit", {}).get("fitted_thresholds")
    print(f"fitted on dev: {fitted}", flush=True)
    test = calibrate(files["test"][0], files["test"][1], corpus, "query-similarity", [f"thresholds={json.dumps(fitted)}"])
    report(f"query-similarity, thresholds {fitted} (dev half), test half", test, "query-similarity")


def relevance(out: Path, files: dict[str, Any], corpus: Path, test_rows: list[tuple[str, str, int]],
              sample_size: int) -> None:
    sample = stratified(test_rows, sample_size)
    sample_qrels = out / f"test-sample-{sample_size}-qrels.txt"
    write_qrels(sample_qrels, sample)
    print(f"\nrelevance sample: {len(sample)} pairs over {len({q for q, _, _ in sample})} queries", flush=True)
    for fencing in ("nonce", "plain"):
        result = calibrate(files["test"][0], sample_qrels, corpus, "relevance",
                           ["provider=transformers", "model=smollm2-135m", 'provider_options={"threads": 1}',
                            f"fencing={fencing}", f"cache={out / 'relevance-cache.sqlite'}"])
        report(f"relevance (SmolLM2-135M-Instruct, fencing {fencing}), grade-stratified sample", result,
               "relevance")


if __name__ == "__main__":
    main()
