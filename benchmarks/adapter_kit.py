"""Shared pieces of the adapter-overhead sections (``benchmarks/adapters.py`` and its ``adapters_<name>.py`` files):
interleaved best-of timing, SciFact records, and the table every section prints."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

from bm25_batch import SCIFACT  # the benchmarks folder is on sys.path when a script runs


def interleaved_best_of(repeat: int, runs: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """The best of ``repeat`` timings of each run, taken in turns (a, b, c, a, b, c, ...) so that a shared
    machine's changing load falls on every side alike instead of on whichever ran last. The garbage of the run
    before is collected first, so that no run pays for another's."""
    best = {name: float("inf") for name in runs}
    for _ in range(max(1, repeat)):
        for name, fn in runs.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def scifact_records() -> list[dict[str, Any]]:
    """SciFact's corpus as ``{doc_id, text, metadata}`` records, as the plugins' ``index_corpus`` helpers read it."""
    from evret_core.vectorstores import read_corpus_file

    return list(read_corpus_file(SCIFACT / "corpus.jsonl"))


class OverheadTable:
    """A section's markdown table: peers (ratio 1.00) and adapter rows, each ratio taken to a named peer, with the
    time the adapter adds per query."""

    def __init__(self, title: str, n_queries: int) -> None:
        self.title, self.n_queries = title, n_queries
        self.rows: list[str] = []
        self.peers: dict[str, float] = {}

    def peer(self, key: str, label: str, seconds: float) -> None:
        self.peers[key] = seconds
        self.rows.append(f"| peer {key}: {label} | {seconds:.3f} | 1.00 | |")

    def adapter(self, label: str, seconds: float, peer: str) -> float:
        base = self.peers[peer]
        added_ms = (seconds - base) / self.n_queries * 1000
        self.rows.append(f"| {label} | {seconds:.3f} | {seconds / base:.2f} (to {peer}) | {added_ms:+.3f} |")
        return seconds / base

    def print(self) -> None:
        print(f"## {self.title}")
        print("| what | seconds | ratio to its peer | added per query (ms) |")
        print("|---|---|---|---|")
        for row in self.rows:
            print(row)
        print(flush=True)
