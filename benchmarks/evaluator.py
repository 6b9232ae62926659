"""Benchmark: the retrieval Evaluator against the bare metrics engine on the same data, in one process (issue 19).

- id-labelled: N queries x 100 retrieved documents as a precomputed run of dicts ``{qid: {docid: score}}``
  (1-10 relevant documents per query, grades 1-3, scores rounded so that ties occur); ``evaluate_run`` on the
  same dicts against ``Evaluator(run, metrics).evaluate(dataset)`` with bootstrap intervals on (1,000
  resamples), and with 1 resample to show what the intervals cost. Peak memory added is tracemalloc's peak over
  one more call (Python and numpy allocations, results kept alive), measured apart from the timed calls.
- text-labelled: M queries x 100 retrieved texts given as columns (``RankedColumns``, what bm25, dense and the
  vector stores return), one expected answer each, the exact judge and the contains judge (the default); the
  Evaluator's own time per retrieved result is the evaluation's time less the time spent inside the judge's
  ``prepare`` and ``batch_judge`` (which receive the contexts as ``ContextColumns`` and do their per-text work
  there).
- a TREC run file (``--trec N``): write N queries x 100 lines to /tmp (deleted after), read it with
  ``read_run_columns``, build the dataset from the qrels, evaluate it (intervals on); time and the process's peak
  resident memory (``VmHWM``, reset before each phase) per phase. At ``--trec-compare M`` queries (default
  100,000) both ``read_run`` (dicts) and ``read_run_columns`` read and evaluate the same file in the same process:
  their ratios, and the same scores (means and a sample of per-query values) asserted.
- statistics: the manifest's dataset hash alone, ``add_statistics`` without the dataset (the bootstrap, 1,000
  resamples) and with it (the two side by side, as the Evaluator runs them), on the id-labelled case's scores.

Run: ``python benchmarks/evaluator.py [--queries 10000 100000] [--text-queries 2000] [--trec 0] [--trec-compare
100000] [--trec-only] [--resamples 1000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import gc
import re
import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evret_core import ContainsJudge, EvaluationDataset, Evaluator, ExactJudge, JudgmentContext, QueryExample
from evret_core.contracts.retrieve import RankedColumns
from evret_core.io.runcolumns import read_run_columns
from evret_core.io.trec import read_qrels, read_run
from evret_core.metrics.engine import accelerator, evaluate_run
from evret_core.results.evaluation import add_statistics

DEPTH = 100
METRICS = ["ndcg@10", "recall@100", "mrr@10"]


def _kib(field: str) -> int:
    match = re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(match.group(1)) if match else 0


def traced_peak(fn: Callable[[], Any]) -> float:
    """Bytes allocated at the peak of one call of ``fn`` (its result alive) over what was allocated before."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    out = fn()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    del out
    return float(peak)


def _reset_peak() -> int:
    """Collect garbage, reset the process's peak resident memory (``VmHWM``), and return ``VmRSS`` (KiB)."""
    gc.collect()
    before = _kib("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return before


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """Best wall time of ``repeat`` calls, the peak memory (bytes) the first call added, its result."""
    best, peak, result = float("inf"), 0.0, None
    for i in range(repeat):
        before = _reset_peak()
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
        if i == 0:
            peak = max(_kib("VmHWM") - before, 0) * 1024.0
            result = out
        del out
    return best, peak, result


def synthetic(n: int, seed: int = 0) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, float]] = {}
    scores = np.round(rng.random((n, DEPTH)) * 20, 1).tolist()
    for q in range(n):
        qid = f"q{q}"
        docs = [f"d{q}_{j}" for j in range(DEPTH)]
        run[qid] = dict(zip(docs, scores[q], strict=True))
        n_rel = int(rng.integers(1, 11))
        picks = rng.choice(DEPTH + 20, size=n_rel, replace=False)
        qrels[qid] = {f"d{q}_{int(p)}": float(rng.integers(1, 4)) for p in picks}
    return run, qrels


def id_case(n: int, repeat: int) -> str:
    run, qrels = synthetic(n)
    dataset = EvaluationDataset(queries=[QueryExample(query_id=q, query_text=q, relevant_doc_ids=rel)
                                         for q, rel in qrels.items()])
    t_engine, _, expected = measure(lambda: evaluate_run(qrels, run, METRICS), repeat)
    t_eval, _, results = measure(lambda: Evaluator(run, METRICS).evaluate(dataset), repeat)
    t_one, _, _ = measure(lambda: Evaluator(run, METRICS, n_resamples=1).evaluate(dataset), repeat)
    for name in METRICS:
        assert abs(results.scores[name] - expected[name]) < 1e-12, name
    assert results.intervals[METRICS[0]][0] < results.scores[METRICS[0]] < results.intervals[METRICS[0]][1]
    del results
    peak = traced_peak(lambda: Evaluator(run, METRICS).evaluate(dataset))
    return (f"| {n:,} | {t_engine:.3f} | {t_eval:.3f} | {t_eval / t_engine:.1f}x | {t_one:.3f} "
            f"({t_one / t_engine:.1f}x) | {peak / 2**20:,.1f} MiB | {peak / (n * DEPTH):.1f} bytes |")


def id_section(sizes: Sequence[int], repeat: int) -> list[str]:
    lines = ["| queries x 100 | `evaluate_run` (s) | `Evaluator.evaluate`, intervals on (s) | ratio | "
             "with 1 resample (s) | peak memory added by the Evaluator | per retrieved result |",
             "|---|---|---|---|---|---|---|"]
    return lines + [id_case(n, repeat) for n in sizes]


def statistics_case(n: int, repeat: int) -> str:
    """The manifest's dataset hash and the bootstrap (1,000 resamples), each alone and as ``add_statistics`` runs
    them (side by side), on the same per-query scores."""
    run, qrels = synthetic(n)
    dataset = EvaluationDataset(queries=[QueryExample(query_id=q, query_text=q, relevant_doc_ids=rel)
                                         for q, rel in qrels.items()])
    results = Evaluator(run, METRICS, n_resamples=1).evaluate(dataset)
    t_hash, _, digest = measure(dataset.content_hash, repeat)
    t_boot, _, _ = measure(lambda: add_statistics(results, None, n_resamples=1000), repeat)
    t_both, _, _ = measure(lambda: add_statistics(results, dataset, n_resamples=1000), repeat)
    assert results.manifest is not None and results.manifest.dataset["hash"] == digest
    return (f"| {n:,} | {t_hash:.3f} | {t_boot:.3f} | {t_hash + t_boot:.3f} | {t_both:.3f} | "
            f"{t_both / (t_hash + t_boot):.2f}x |")


def statistics_section(sizes: Sequence[int], repeat: int) -> list[str]:
    lines = ["| queries | dataset hash alone (s) | `add_statistics` without the dataset: bootstrap (s) | sum (s) | "
             "`add_statistics` with the dataset: side by side (s) | side by side / sum |",
             "|---|---|---|---|---|---|"]
    return lines + [statistics_case(n, repeat) for n in sizes]


class TimedJudge:
    """Mixin timing the judge's own methods (``prepare`` and ``batch_judge``, which the evaluator calls with
    :class:`~evret_core.contracts.judge.ContextColumns`), so the evaluator's share can be told apart."""

    judge_seconds = 0.0

    def prepare(self, contexts: Sequence[JudgmentContext]) -> None:
        start = time.perf_counter()
        super().prepare(contexts)  # type: ignore[misc]
        TimedJudge.judge_seconds += time.perf_counter() - start

    def batch_judge(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        start = time.perf_counter()
        out: list[bool | None] = super().batch_judge(contexts)  # type: ignore[misc]
        TimedJudge.judge_seconds += time.perf_counter() - start
        return out


class TimedExact(TimedJudge, ExactJudge):
    """The exact judge, timed."""


class TimedContains(TimedJudge, ContainsJudge):
    """The contains judge (the default judge), timed."""


def text_section(n: int, repeat: int) -> list[str]:
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(5000)]
    texts = {q: [" ".join(rng.choice(words, 8)) for _ in range(DEPTH)] for q in range(n)}
    # the rows as a retriever gives them to the evaluator (bm25, dense and the vector stores return columns)
    run = {f"t{q}": RankedColumns([f"d{q}_{j}" for j in range(DEPTH)], np.arange(DEPTH, 0, -1.0), docs)
           for q, docs in texts.items()}
    dataset = EvaluationDataset(queries=[
        QueryExample(query_id=f"t{q}", query_text=f"question {q}", expected_answers=[docs[int(rng.integers(DEPTH))]])
        for q, docs in texts.items()])
    lines = ["| text-labelled queries x 100 | judge | Evaluator's own time (s, judge excluded) | per retrieved result "
             "| with 1 resample (per result) | time inside the judge (s) |",
             "|---|---|---|---|---|---|"]
    for judge in (TimedExact, TimedContains):
        own: dict[int, float] = {}
        inside = 0.0
        for resamples in (1000, 1):
            best = float("inf")
            for _ in range(repeat):
                TimedJudge.judge_seconds = 0.0
                start = time.perf_counter()
                res = Evaluator(run, METRICS, judge=judge(), n_resamples=resamples).evaluate(dataset)
                spent = time.perf_counter() - start - TimedJudge.judge_seconds
                if spent < best:
                    best = spent
                    inside = TimedJudge.judge_seconds if resamples == 1000 else inside
            own[resamples] = best
            assert res.scores["recall@100"] == 1.0
        per = {r: t / (n * DEPTH) * 1e6 for r, t in own.items()}
        lines.append(f"| {n:,} | {judge.name} | {own[1000]:.3f} | {per[1000]:.2f} µs | {per[1]:.2f} µs | {inside:.2f} |")
    return lines


def _phase(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall time of one call, and the process's peak resident memory (GiB) during it (high-water mark reset)."""
    _reset_peak()
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, _kib("VmHWM") / 2**20, out


def trec_case(run_path: Path, qrels_path: Path, columns: bool, n_resamples: int) -> list[Any]:
    """Read the run file (columns or ``read_run``'s dicts), the dataset from the qrels file, evaluate: time and
    peak RSS of each phase, the scores and a sample of per-query values."""
    reader = read_run_columns if columns else read_run
    t_read, rss_read, run = _phase(lambda: reader(run_path))
    t_data, rss_data, dataset = _phase(lambda: EvaluationDataset(queries=[
        QueryExample(query_id=q, query_text=q, relevant_doc_ids=rel) for q, rel in read_qrels(qrels_path).items()]))
    t_eval, rss_eval, results = _phase(lambda: Evaluator(run, METRICS, n_resamples=n_resamples).evaluate(dataset))
    held = _kib("VmRSS") / 2**20
    scores = dict(results.scores)
    qids = [q.query_id for q in dataset.queries]
    sample = {q: results.per_query[q].scores for q in qids[:: max(len(qids) // 50, 1)]}
    return [t_read, rss_read, t_data, rss_data, t_eval, rss_eval, held, scores, sample]


def trec_section(n: int, small: int, n_resamples: int) -> list[str]:
    """The columnar reader at N queries; both readers at a smaller N for the ratio (same file, same process)."""
    import runfile_gen

    lines = ["| TREC run file (queries x 100) | reader | read (s) | peak RSS reading (GiB) | dataset from qrels (s) | "
             "peak RSS (GiB) | evaluate (s) | peak RSS evaluating (GiB) | RSS with results held (GiB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    tmp = Path(tempfile.mkdtemp(prefix="evret-trec-", dir="/tmp"))
    try:
        for size, readers in ((small, (False, True)), (n, (True,))):
            if not size:
                continue
            run_path, qrels_path = runfile_gen.write(tmp, size)
            got = {}
            for columns in readers:
                got[columns] = trec_case(run_path, qrels_path, columns, n_resamples)
                t_read, rss_read, t_data, rss_data, t_eval, rss_eval, held = got[columns][:7]
                name = "read_run_columns" if columns else "read_run (dicts)"
                lines.append(f"| {size:,} ({run_path.stat().st_size / 2**30:.1f} GiB file) | {name} | {t_read:.1f} | "
                             f"{rss_read:.2f} | {t_data:.1f} | {rss_data:.2f} | {t_eval:.1f} | {rss_eval:.2f} | "
                             f"{held:.2f} |")
                gc.collect()
            if len(got) == 2:
                assert got[True][7] == got[False][7] and got[True][8] == got[False][8], "columns != dicts"
                a, b = got[True], got[False]
                lines.append(f"| {size:,} | columns / dicts | {a[0] / b[0]:.2f}x | {a[1] / b[1]:.2f}x | | | "
                             f"{a[4] / b[4]:.2f}x | {a[5] / b[5]:.2f}x | {a[6] / b[6]:.2f}x |")
            run_path.unlink()
            qrels_path.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--text-queries", type=int, default=2000, help="queries of the text-labelled case (0: skip)")
    parser.add_argument("--trec", type=int, default=0, help="queries of the TREC run file case (0: skip)")
    parser.add_argument("--trec-compare", type=int, default=100_000,
                        help="queries of the run file both readers evaluate, for the ratio (0: skip)")
    parser.add_argument("--trec-only", action="store_true", help="only the TREC run file section")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples in the TREC section")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"compiled reader: {'yes' if accelerator() is not None else 'no'}; metrics {', '.join(METRICS)}")
    if not args.trec_only:
        print("\n".join(id_section(args.queries, args.repeat)))
        print()
        print("\n".join(statistics_section(args.queries, args.repeat)))
        if args.text_queries:
            print()
            print("\n".join(text_section(args.text_queries, args.repeat)))
    if args.trec or args.trec_compare and args.trec_only:
        print()
        print("\n".join(trec_section(args.trec, args.trec_compare, args.resamples)))


if __name__ == "__main__":
    main()
