"""A judging pool from runs (``evret judge``): the union over runs of each query's top ``depth`` documents.

The pairs come in judging order: by best rank (the best rank any run gives the document), then by the first run
that gives it that rank, then by query order. A run killed half way has then judged complete shallower pools of
every query first, so what it wrote is a depth-d pool for some d rather than deep pools of a few queries.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field

from evret_core.contracts.errors import EvretError

__all__ = ["Pool", "pool_runs"]


@dataclass
class Pool:
    """The pairs to judge, ``(query_id, doc_id)`` in judging order; ``per_query`` the pool size of every query
    (0 for a query no run retrieved), ``skipped`` the pairs left out as already judged, ``extra_queries`` the runs'
    queries that are not among the queries (ignored), in first-seen order."""

    pairs: list[tuple[str, str]]
    per_query: dict[str, int]
    skipped: int = 0
    extra_queries: list[str] = field(default_factory=list)


def pool_runs(
    queries: Sequence[str],
    runs: Sequence[Mapping[str, Sequence[str]]],
    depth: int,
    judged: Mapping[str, Container[str]] | None = None,
) -> Pool:
    """The pool of ``runs`` (each ``{query_id: ranked doc ids}``) over ``queries`` to ``depth``, in judging order
    (see the module docs); a pair in ``judged`` (``{query_id: doc ids}``, e.g. an existing qrels file) is left out
    and counted."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise EvretError(f"the pool depth must be a positive integer, got {depth!r}")
    order = {qid: i for i, qid in enumerate(queries)}
    best: dict[tuple[str, str], tuple[int, int, int]] = {}  # pair -> (best rank, run, query position)
    extra: dict[str, None] = {}
    for r, run in enumerate(runs):
        for qid, ranked in run.items():
            position = order.get(qid)
            if position is None:
                extra[qid] = None
                continue
            seen: set[str] = set()
            for rank, doc in enumerate(ranked[:depth]):
                if doc in seen:  # a document listed twice counts at its better rank
                    continue
                seen.add(doc)
                key = (rank, r, position)
                held = best.get((qid, doc))
                if held is None or key < held:
                    best[(qid, doc)] = key
    per_query = dict.fromkeys(queries, 0)
    skipped = 0
    kept: list[tuple[tuple[int, int, int], tuple[str, str]]] = []
    for pair, key in best.items():
        done = None if judged is None else judged.get(pair[0])
        if done is not None and pair[1] in done:
            skipped += 1
            continue
        per_query[pair[0]] += 1
        kept.append((key, pair))
    kept.sort(key=lambda item: item[0])  # stable: pairs with one key keep their first-seen order
    return Pool([pair for _, pair in kept], per_query, skipped, list(extra))
