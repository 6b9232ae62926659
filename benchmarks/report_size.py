"""Size of the HTML report of two runs of 1,793 queries (the seeded SQuAD-shaped pair of
tests/results/conftest.py: 10 passages per query, 7,200-passage corpus), and what its bytes are spent on.

    python benchmarks/report_size.py [--queries 1793] [--out report.html]

To measure another version of the report code, put its evret_core first on PYTHONPATH (the runs are built the
same way: the generator only uses the evaluator).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=1793)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("results_conftest", ROOT / "tests" / "results" / "conftest.py")
    assert spec and spec.loader
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    from evret_core.report import build_report_data, render_report

    runs = conftest.synthetic_runs(args.queries)
    started = time.perf_counter()
    html = render_report(build_report_data(runs), "html")
    elapsed = time.perf_counter() - started
    size = len(html.encode("utf-8"))
    print(f"{len(runs)} runs x {args.queries} queries: {size:,} bytes ({size / 1e6:.2f} MB), rendered in {elapsed:.1f} s")
    block = re.search(r'<script type="application/json" id="evret-data">(.*?)</script>', html, re.S)
    if block:  # the JSON drill-down (absent in the f-string report this replaced)
        data = json.loads(block.group(1))
        texts = sum(len(t.encode("utf-8")) for t in data["texts"])
        print(f"drill-down JSON {len(block.group(1).encode()):,} bytes: {len(data['texts']):,} distinct texts "
              f"({texts:,} bytes, cut to {data['cap']} characters; {sum(data['lengths']):,} whole), "
              f"{len(data['ids']):,} distinct ids; rest of the page {size - len(block.group(1).encode()):,} bytes")
    if args.out:
        args.out.write_text(html, encoding="utf-8")


if __name__ == "__main__":
    main()
