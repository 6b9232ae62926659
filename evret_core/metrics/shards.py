"""A run file too big for one process, scored in shards that each worker reads itself.

:func:`shard_ranges` cuts a TREC run file into byte ranges that start and end at query boundaries (a cut moves
forward to the first line of another query). :func:`score_shard` is what a worker runs on one range: it reads the
range as columns (:func:`~evret_core.io.runcolumns.read_run_columns`), reads from the qrels file only its own
queries' judgments, and computes every metric per query in chunks of 2,048 queries, returning the query ids and
one float64 array per metric (and the worker's peak resident memory). :func:`evaluate_run_file` runs the shards
in this process, one after another, or on an executor that has ``map_shards`` (evret-ray's ``ray`` runs them as
Ray tasks), and joins the per-query columns: the driver never holds the run, only per-query results.

The per-query values are those of ``evaluate_run(read_qrels(qrels), read_run(run), metrics, per_query=True)``,
queries in the run's order (trec_eval's query set: the run's judged queries). Defaults that depend on the
judgments (err's ``max_grade``) are resolved by the driver over the whole qrels file before the shards start, as
``evaluate_run`` resolves them over all of its qrels. With ``complete=True`` (trec_eval -c) every judged query
counts: after the shards, the driver reads from the qrels file the judgments of the queries no shard scored (only
theirs) and scores them as absent from the run, after the run's queries in qrels order, as
``evaluate_run(..., complete=True)`` does. A query whose lines are not adjacent can land in two shards:
that is an error naming the query (sort the run by query: ``sort -s -k1,1``).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.contracts.metric import Metric

__all__ = ["RunFileScores", "ShardScores", "evaluate_run_file", "score_shard", "shard_ranges"]

SHARD_BYTES = 256 << 20  # default shard size: about 8 million lines of a typical run file
MAX_SHARDS = 10_000  # each shard reads the whole qrels file: more would be slower, never faster


def _first_field(raw: bytes) -> str | None:
    fields = raw.decode("utf-8", "replace").split()
    return None if not fields or fields[0].startswith("#") else fields[0]


def shard_ranges(path: str | Path, shards: int | None = None) -> list[tuple[int, int]]:
    """``(start, stop)`` byte ranges covering ``path``, each starting at the first line of a query; ``shards``
    ranges of about equal size (default: one per 256 MiB), fewer when queries are larger than a range; at most
    :data:`MAX_SHARDS`, and never more than the run has queries."""
    from evret_core.io.trecscan import open_binary

    path = Path(path)
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise EvretError(f"shards must be a positive integer, got {shards!r}")
    if shards is not None and shards > MAX_SHARDS:
        raise EvretError(f"shards must be at most {MAX_SHARDS:,} (each shard reads the qrels file), got {shards}")
    with open_binary(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if shards is None:
            shards = max(1, min(MAX_SHARDS, -(-size // SHARD_BYTES)))
        cuts = [0]
        i = 1
        while i < shards:
            target = size * i // shards
            handle.seek(target)
            if target > 0:
                handle.readline()  # the rest of the line the target falls in
            first: str | None = None
            while True:
                at = handle.tell()
                raw = handle.readline()
                if not raw:
                    at = size
                    break
                qid = _first_field(raw)
                if qid is None:
                    continue
                if first is None:
                    first = qid
                elif qid != first:
                    break
            if cuts[-1] < at < size:
                cuts.append(at)
            if at >= size:
                break
            # the next index whose target lies past this cut: a long query never costs one loop per index it spans
            i = max(i + 1, -(-at * shards // size))
    cuts.append(size)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a] or [(0, size)]


def read_qrels_for(path: str | Path, queries: Container[str]) -> dict[str, dict[str, float]]:
    """``read_qrels(path, queries)``: the judgments of ``queries`` only (every line is still checked)."""
    from evret_core.io.trec import read_qrels

    return read_qrels(path, queries)


@dataclass
class ShardScores:
    """One shard's result: its judged queries (in file order), each metric's values for them, the peak
    resident memory (bytes) and the id of the process that scored it, how many run lines it read, and the run tag
    of its first line."""

    qids: list[str]
    values: dict[str, np.ndarray]
    peak_rss: int
    lines: int = 0
    pid: int = 0
    tag: str = ""


def score_shard(
    run_path: str,
    start: int,
    stop: int | None,
    qrels_path: str,
    metrics: Sequence[str | Metric],
    relevance_level: float | None = None,
) -> ShardScores:
    """Score the byte range ``start:stop`` of a run file (what a worker runs; see the module). ``metrics`` come
    from :func:`evaluate_run_file` with err's default ``max_grade`` already resolved over the whole qrels file."""
    from evret_core.io.runcolumns import read_run_columns
    from evret_core.metrics.engine import (
        _compute_chunked,
        _needed_depth,
        accelerator,
        batch_from_run,
        resolve_metrics,
    )

    resolved = resolve_metrics(list(metrics))
    run = read_run_columns(run_path, start, stop, threads=1)  # the shards run side by side: one thread each
    qrels = read_qrels_for(qrels_path, run.index)
    qids = [q for q in run.qids if q in qrels]
    depth, fast = _needed_depth(resolved), accelerator()
    if qids:
        def build(chunk: list[str]) -> Any:  # the chunk's dicts only, decoded in one call
            dicts = dict(zip(chunk, run.queries(run.positions(chunk).tolist()), strict=True))
            return batch_from_run(qrels, dicts, chunk, relevance_level=relevance_level, depth=depth, fast=fast)

        columns = _compute_chunked(build, qids, resolved, 2048)
    else:
        columns = [np.zeros(0) for _ in resolved]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    values = {m.name: c for m, c in zip(resolved, columns, strict=True)}
    return ShardScores(qids, values, peak, len(run.scores), os.getpid(), run.tag)


@dataclass
class RunFileScores:
    """Per-query metric values of a whole run file: ``qids`` in the run's order, one array per metric, and the
    run tag of the file's first line (``read_run_columns``'s ``tag``)."""

    qids: list[str]
    values: dict[str, np.ndarray]
    shard_peak_rss: list[int] = field(default_factory=list)
    shard_pids: list[int] = field(default_factory=list)
    tag: str = ""

    def means(self) -> dict[str, float]:
        """Each metric's mean over the queries (``evaluate_run``'s summary)."""
        return {name: float(v.mean()) if len(v) else 0.0 for name, v in self.values.items()}

    def per_query(self, qid: str) -> dict[str, float]:
        """One query's values (an index is built on first use)."""
        if not hasattr(self, "_index"):
            self._index = {q: i for i, q in enumerate(self.qids)}
        i = self._index[qid]
        return {name: float(v[i]) for name, v in self.values.items()}


def evaluate_run_file(
    qrels_path: str | Path,
    run_path: str | Path,
    metrics: Iterable[str | Metric] | str,
    *,
    shards: int | None = None,
    executor: Any = None,
    relevance_level: float | None = None,
    complete: bool = False,
) -> RunFileScores:
    """Score a TREC run file against a qrels file shard by shard (see the module), in this process or on
    ``executor`` (an object with ``map_shards(fn, tasks)``, e.g. ``RayExecutor``); ``complete`` also scores the
    judged queries missing from the run (trec_eval -c)."""
    from evret_core.io.trec import read_qrels
    from evret_core.metrics.engine import resolve_judged_defaults, resolve_metrics

    resolved = resolve_metrics(metrics if not isinstance(metrics, str) else [metrics])
    names = [m.name for m in resolved]
    if Path(qrels_path).is_dir():
        raise EvretError(f"{qrels_path}: is a folder, not a file")
    if not Path(qrels_path).is_file():
        raise EvretError(f"{qrels_path}: no such qrels file")
    # err's default max_grade: the highest grade of the whole qrels file, resolved here, once, for every shard
    resolved = resolve_judged_defaults(resolved, lambda: read_qrels(qrels_path).items())
    ranges = shard_ranges(run_path, shards)
    tasks = [(str(run_path), a, b, str(qrels_path), resolved, relevance_level) for a, b in ranges]
    run_map: Callable[[Callable[..., ShardScores], list[tuple[Any, ...]]], Iterator[ShardScores]] | None = getattr(
        executor, "map_shards", None)
    results: Iterable[ShardScores] = (run_map(score_shard, tasks) if run_map is not None
                                      else (score_shard(*task) for task in tasks))
    qids: list[str] = []
    parts: dict[str, list[np.ndarray]] = {name: [] for name in names}
    peaks: list[int] = []
    pids: list[int] = []
    seen: set[str] = set()
    tag = ""
    lines = 0
    for shard in results:
        lines += shard.lines
        tag = tag or shard.tag  # shards come back in file order: the first line's tag
        clash = seen.intersection(shard.qids)
        if clash:
            raise EvretError(f"{run_path}: query {sorted(clash)[0]!r} has lines in two parts of the file; sort the run "
                             f"by query (sort -s -k1,1) to score it in shards")
        seen.update(shard.qids)
        qids.extend(shard.qids)
        for name in names:
            parts[name].append(shard.values[name])
        peaks.append(shard.peak_rss)
        pids.append(shard.pid)
    if not lines:
        raise EvretError(no_lines_error(run_path))
    if complete:
        missing = read_qrels_for(qrels_path, _Except(seen))  # only the queries no shard scored
        if missing:
            from evret_core.metrics.engine import evaluate_run

            scored = evaluate_run(missing, {}, resolved, per_query=True, relevance_level=relevance_level,
                                  complete=True)
            qids.extend(missing)
            for name in names:
                parts[name].append(np.fromiter((scored[q][name] for q in missing), np.float64, len(missing)))
    if not qids:
        raise EvretError("no query of the run has relevance judgments (the qrels and the run share no query id)"
                         + ("" if complete else "; complete=True (evret trec --complete) scores every judged query, missing "
                                                  "ones as 0"))
    return RunFileScores(qids, {n: np.concatenate(p) for n, p in parts.items()}, peaks, pids, tag)


def no_lines_error(run_path: str | Path) -> str:
    """The message for a run file without a result line (empty, or only blank and comment lines)."""
    return f"{run_path}: the run file has no result lines (it is empty or holds only blank and comment lines)"


class _Except:
    """The queries not in ``scored``, as a container for :func:`read_qrels_for`."""

    def __init__(self, scored: set[str]) -> None:
        self.scored = scored

    def __contains__(self, qid: object) -> bool:
        return qid not in self.scored
