"""The built-in retriever ``rerank``: any registered retriever's top ``depth`` candidates, re-scored and re-ordered by
any registered reranker.

Both parts are built by the one component builder (:func:`evret_core.plugins.builder.build`) from their registered
names and options, so their options are checked (with a did-you-mean) as anywhere else, the first stage is handed
the dataset being evaluated when its factory takes one, and the whole retriever's recipe rebuilds it on a worker.
Each batch of queries is one first-stage call (``depth`` candidates per query) and one reranker call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import batch_retrieve
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult, Retriever, coerce_results
from evret_core.limits import MAX_DEPTH

__all__ = ["DEFAULT_DEPTH", "RerankRetriever"]

DEFAULT_DEPTH = 100
"""Candidates fetched from the first stage per query, by default."""


def _spec(value: Any, option: str) -> tuple[str, dict[str, Any]]:
    """A component option: a registered name, or a table ``{name, options}``."""
    if isinstance(value, str) and value:
        return value, {}
    if isinstance(value, Mapping) and isinstance(value.get("name"), str) and value["name"]:
        extra = sorted(set(value) - {"name", "options"})
        if extra:
            raise EvretError(f"retriever 'rerank': option {option!r} is a table {{name, options}}; it has "
                             f"{', '.join(repr(k) for k in extra)} too (put the {option}'s options under 'options')")
        options = value.get("options") or {}
        if not isinstance(options, Mapping):
            raise EvretError(f"retriever 'rerank': option '{option}.options' must be a table of the {option}'s "
                             f"options, got {type(options).__name__}")
        return value["name"], dict(options)
    raise EvretError(f"retriever 'rerank': option {option!r} must name a registered {option} or be a table "
                     f"{{name = ..., options = {{...}}}}, got {value!r}")


class RerankRetriever(Retriever):
    """``retriever``'s top ``depth`` results per query, reranked by ``reranker``, cut to ``k``.

    :param retriever: the first stage: a registered retriever's name, or ``{"name": ..., "options": {...}}``.
    :param reranker: a registered reranker's name, or ``{"name": ..., "options": {...}}``.
    :param depth: candidates fetched per query (default 100); when ``k`` is larger, ``k`` are fetched.
    :param dataset: the dataset being evaluated, handed to the first stage's factory when it takes one.
    """

    name = "rerank"

    def __init__(self, retriever: Any = None, reranker: Any = None, depth: int = DEFAULT_DEPTH,
                 dataset: Any = None) -> None:
        from evret_core.plugins.builder import build

        if retriever is None or reranker is None:
            missing = "retriever" if retriever is None else "reranker"
            raise EvretError(f"retriever 'rerank': option {missing!r} is missing (a registered {missing}'s name, "
                             f"or {{name = ..., options = {{...}}}})")
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
            raise EvretError(f"retriever 'rerank': option 'depth' must be an integer from 1 to {MAX_DEPTH}, "
                             f"got {depth!r}")
        first_name, first_options = _spec(retriever, "retriever")
        rerank_name, rerank_options = _spec(reranker, "reranker")
        if first_name == "run":
            raise EvretError("retriever 'rerank': the first stage cannot be 'run' (a precomputed run answers by query "
                             "id, and a reranker reads the query's text): rerank a retriever that takes queries")
        # the reranker first: it is cheap to build, and a bad one fails before the first stage indexes a corpus
        self.reranker = build(kinds.RERANKER, rerank_name, rerank_options)
        self.first_stage = build(kinds.RETRIEVER, first_name, first_options, dataset=dataset)
        self.depth = depth

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        queries = list(queries)
        if not queries:
            return []
        fetched = batch_retrieve(self.first_stage, queries, max(self.depth, k))
        if len(fetched) != len(queries):
            raise EvretError(f"retriever 'rerank': the first stage returned {len(fetched)} result lists for "
                             f"{len(queries)} queries")
        where = f"retriever 'rerank': first stage {type(self.first_stage).__name__}"
        depth = max(self.depth, k)
        candidates = [(got if isinstance(got, RankedColumns) else
                       RankedColumns.from_results(coerce_results(got, where))).head(depth) for got in fetched]
        return list(self.reranker.batch_rerank_columns(queries, candidates, k))

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        return [columns.to_results() for columns in self.batch_retrieve_columns(queries, k)]

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def config(self) -> dict[str, Any]:
        first = getattr(self.first_stage, "config", None)
        return {"name": self.name, "depth": self.depth,
                "retriever": first() if callable(first) else {"name": type(self.first_stage).__name__},
                "reranker": self.reranker.config()}

    def stats(self) -> dict[str, Any]:
        """The reranker's counts (pairs scored, cache hits...)."""
        return {"reranker": self.reranker.stats()}
