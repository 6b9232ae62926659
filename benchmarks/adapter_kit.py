"""Shared pieces of the adapter-overhead sections (``benchmarks/adapters.py`` and its ``adapters_<name>.py`` files):
interleaved best-of timing, SciFact records, and the table every section prints."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from bm25_batch import SCIFACT  # the benchmarks folder is on sys.path when a script runs


class Timing(NamedTuple):
    wall: float  # seconds on the clock
    cpu: float  # seconds of this process's CPU, all its threads (a server in another process is not counted)


def interleaved_best_of(repeat: int, runs: dict[str, Callable[[], Any]]) -> dict[str, Timing]:
    """The best of ``repeat`` timings of each run (wall and CPU, each its own minimum), taken in turns (a, b, c,
    a, b, c, ...) so that a shared machine's changing load falls on every side alike instead of on whichever ran
    last. The garbage of the run before is collected first, so that no run pays for another's. CPU time moves
    much less with the machine's load than wall time."""
    wall = {name: float("inf") for name in runs}
    cpu = dict(wall)
    for _ in range(max(1, repeat)):
        for name, fn in runs.items():
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
            wall[name] = min(wall[name], time.perf_counter() - start)
    return {name: Timing(wall[name], cpu[name]) for name in runs}


def scifact_records() -> list[dict[str, Any]]:
    """SciFact's corpus as ``{doc_id, text, metadata}`` records, as the plugins' ``index_corpus`` helpers read it."""
    from evret_core.retrieve.vectorstores import read_corpus_file

    return list(read_corpus_file(SCIFACT / "corpus.jsonl"))


class OverheadTable:
    """A section's markdown table: peers (ratio 1.00) and adapter rows, each ratio taken to a named peer, in wall
    and in CPU time, with the wall time the adapter adds per query."""

    def __init__(self, title: str, n_queries: int) -> None:
        self.title, self.n_queries = title, n_queries
        self.rows: list[str] = []
        self.peers: dict[str, Timing] = {}

    def peer(self, key: str, label: str, timing: Timing) -> None:
        self.peers[key] = timing
        self.rows.append(f"| peer {key}: {label} | {timing.wall:.3f} | 1.00 | {timing.cpu:.3f} | 1.00 | |")

    def adapter(self, label: str, timing: Timing, peer: str) -> float:
        base = self.peers[peer]
        added_ms = (timing.wall - base.wall) / self.n_queries * 1000
        self.rows.append(f"| {label} | {timing.wall:.3f} | {timing.wall / base.wall:.2f} (to {peer}) | "
                         f"{timing.cpu:.3f} | {timing.cpu / base.cpu:.2f} | {added_ms:+.3f} |")
        return timing.wall / base.wall

    def print(self) -> None:
        print(f"## {self.title}")
        print("| what | wall s | wall ratio to its peer | CPU s | CPU ratio | added wall per query (ms) |")
        print("|---|---|---|---|---|---|")
        for row in self.rows:
            print(row)
        print(flush=True)
