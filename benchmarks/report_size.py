"""Size of the HTML report, and what its bytes are spent on, for two shapes of data:

- default: two runs of 1,793 queries (the seeded SQuAD-shaped pair of tests/results/conftest.py: 10 passages per
  query, 7,200-passage corpus, so passages recur across queries and runs);
- ``--distinct``: the red-team's worst case R10: two runs of 1,800 queries whose 20 retrieved documents are all
  distinct 1 KB texts (72,000 distinct texts).

    python benchmarks/report_size.py [--queries 1793] [--distinct] [--out report.html]

To measure another version of the report code, put its evret_core first on PYTHONPATH (the runs are built the
same way: the generator only uses the evaluator).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["alpha", "beta", "gamma", "delta", "omicron", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega"]


def synthetic(queries: int) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("results_conftest", ROOT / "tests" / "results" / "conftest.py")
    assert spec and spec.loader
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    runs: dict[str, Any] = conftest.synthetic_runs(queries)
    return runs


def distinct(queries: int, depth: int = 20) -> dict[str, Any]:
    """Every retrieved document of every query of both runs is its own 1,000-character text."""
    from evret_core import EvaluationDataset, Evaluator, QueryExample

    rng = random.Random(0)
    dataset = EvaluationDataset(name="r10", queries=[
        QueryExample(query_id=f"q{i:05d}", query_text=f"question {i}", relevant_doc_ids=[f"a-{i}-0"])
        for i in range(queries)])
    runs = {}
    for run in ("a", "b"):
        docs = {q.query_text: [{"doc_id": f"{run}-{i}-{k}", "score": 20.0 - k,
                                "text": " ".join(rng.choice(WORDS) for _ in range(200))[:1000]} for k in range(depth)]
                for i, q in enumerate(dataset.queries)}

        def retrieve(query: str, k: int, docs: dict[str, list[dict[str, Any]]] = docs) -> list[dict[str, Any]]:
            return docs[query][:k]

        runs[run] = Evaluator(retrieve, ["recall@20", "ndcg@10"], n_resamples=200, seed=0).evaluate(dataset)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=None, help="default 1,793 (1,800 with --distinct)")
    parser.add_argument("--distinct", action="store_true", help="the worst case: every retrieved text distinct")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from evret_core.report import build_report_data, render_report

    queries = args.queries or (1800 if args.distinct else 1793)
    runs = distinct(queries) if args.distinct else synthetic(queries)
    started = time.perf_counter()
    data = build_report_data(runs)
    html = render_report(data, "html")
    elapsed = time.perf_counter() - started
    size = len(html.encode("utf-8"))
    print(f"{len(runs)} runs x {queries} queries{' (all texts distinct)' if args.distinct else ''}: {size:,} bytes "
          f"({size / 1e6:.2f} MB), rendered in {elapsed:.1f} s")
    block = re.search(r'<script type="application/json" id="evret-data">(.*?)</script>', html, re.S)
    if block:  # the JSON drill-down (absent in the f-string report this replaced)
        value = json.loads(block.group(1))
        texts = sum(len(t.encode("utf-8")) for t in value["texts"])
        print(f"drill-down JSON {len(block.group(1).encode()):,} bytes: {len(value['queries']):,} queries, "
              f"{len(value['texts']):,} distinct texts ({texts:,} bytes, cut to {value['cap']} characters; "
              f"{sum(value['lengths']):,} whole), {len(value['ids']):,} distinct ids; rest of the page "
              f"{size - len(block.group(1).encode()):,} bytes")
    for warning in getattr(data, "warnings", []):
        print(f"WARNING: {warning}")
    if args.out:
        args.out.write_text(html, encoding="utf-8")


if __name__ == "__main__":
    main()
