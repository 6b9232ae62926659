"""Evaluate a LlamaIndex retriever (or index) where it lives: no re-indexing, no copy of the corpus."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from evret_core.sdk import (
    EvretError,
    RankedColumns,
    RetrievalResult,
    Retriever,
    check_bool,
    load_object,
    run_sync,
)

DEFAULT_MAX_CONCURRENCY = 8
T = TypeVar("T")


def is_llamaindex_object(obj: Any) -> bool:
    """True when ``obj`` is a LlamaIndex object, decided without importing llama-index-core."""
    return any(getattr(cls, "__module__", "").startswith("llama_index") for cls in type(obj).__mro__)


def _has_top_k(retriever: Any) -> bool:
    """Whether the retriever exposes a settable ``similarity_top_k`` (vector, BM25 and most built-in retrievers)."""
    attr = getattr(type(retriever), "similarity_top_k", None)
    if isinstance(attr, property):
        return attr.fset is not None
    return isinstance(getattr(retriever, "similarity_top_k", None), int)



class LlamaIndexRetriever(Retriever):
    """Wraps a LlamaIndex ``BaseRetriever`` (or an index, through its ``as_retriever()``) as an Evret retriever.

    Ids are ``node.node_id``; with ``ids="document"`` the id of the source ``Document`` (``node.ref_doc_id``), or
    ``node.metadata[id_key]`` when ``id_key`` is given; in those two modes a document is ranked where its best chunk
    is (its other chunks are dropped, so a list can be shorter than ``k``). The text is the node's
    content (``get_content()``, without metadata); the node's metadata is kept; scores are LlamaIndex's, or rank
    scores when it gives none. Queries run through ``aretrieve``, at most ``max_concurrency`` at a time.

    The k rule: LlamaIndex takes the number of results at construction, not per call. When the retriever has a
    settable ``similarity_top_k``, each call uses a copy set to ``k`` (your object is not changed). Otherwise it is
    called as it is; results are cut to ``k``, and a query that gets fewer than ``k`` results is an ``EvretError``
    (its metrics at k would be computed on a shorter list than asked) unless ``allow_fewer=True``.
    """

    name = "llamaindex"

    def __init__(
        self,
        retriever: Any,
        id_key: str | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        allow_fewer: bool = False,
        ids: str = "node",
    ) -> None:
        from llama_index.core.base.base_retriever import BaseRetriever
        from llama_index.core.indices.base import BaseIndex

        if int(max_concurrency) < 1:
            raise EvretError(
                f"llamaindex retriever: option 'max_concurrency' must be at least 1, got {max_concurrency}"
            )
        if ids not in ("node", "document"):
            raise EvretError(f"llamaindex retriever: option 'ids' must be 'node' or 'document', got {ids!r}")
        if isinstance(retriever, BaseIndex):
            retriever = retriever.as_retriever()
        if not isinstance(retriever, BaseRetriever):
            raise EvretError(
                f"llamaindex retriever: expected a LlamaIndex BaseRetriever or index, got {type(retriever).__name__}"
            )
        self.retriever: Any = retriever
        self.id_key = id_key
        self.max_concurrency = int(max_concurrency)
        self.allow_fewer = check_bool(allow_fewer, "llamaindex retriever: option 'allow_fewer'")
        self.ids = ids
        self.sets_top_k = _has_top_k(retriever)

    # -- ids and texts -----------------------------------------------------------------------------------------
    def _doc_id(self, node: Any, rank: int, query: str) -> Any:
        if self.id_key is not None:
            doc_id = (getattr(node, "metadata", None) or {}).get(self.id_key)
            if doc_id is None:
                raise EvretError(
                    f"llamaindex retriever: node at rank {rank} for query {query[:60]!r} has no metadata key "
                    f"{self.id_key!r} (option 'id_key'); its metadata keys are "
                    f"{sorted(getattr(node, 'metadata', None) or {}) or 'none'}"
                )
            return doc_id
        if self.ids == "document":
            if node.ref_doc_id is None:
                raise EvretError(
                    f"llamaindex retriever: node at rank {rank} for query {query[:60]!r} has no source document "
                    f"(option 'ids' is 'document'); use ids='node' or option 'id_key'"
                )
            return node.ref_doc_id
        return node.node_id

    def _ranking(self, query: str, hits: Sequence[Any], k: int) -> tuple[list[str], list[float], list[Any]]:
        """(ids, scores, nodes) best first, at most ``k``: the k rule checked, in the document modes one entry per
        document (where its best chunk is). Both result paths read this, so they cannot disagree."""
        if len(hits) < k and not self.sets_top_k and not self.allow_fewer:
            raise EvretError(
                f"llamaindex retriever: {type(self.retriever).__name__} returned {len(hits)} results for query "
                f"{query[:60]!r} but k is {k}, and it has no similarity_top_k to ask for more; build it to return "
                f"at least {k} results, or set option 'allow_fewer' to evaluate the shorter lists"
            )
        n = len(hits)
        # without a score from LlamaIndex, a descending rank score keeps the order in exported runs
        if self.ids == "node" and self.id_key is None:  # one entry per node: no look-up per hit
            kept = hits[:k]
            nodes = [hit.node for hit in kept]
            return ([str(node.node_id) for node in nodes],
                    [float(n - i) if hit.score is None else float(hit.score) for i, hit in enumerate(kept)], nodes)
        ids: list[str] = []
        scores: list[float] = []
        nodes = []
        for i, hit in enumerate(hits):
            doc_id = str(self._doc_id(hit.node, i + 1, query))
            if doc_id in ids:  # at most k ids: a list is as quick as a set here
                continue
            ids.append(doc_id)
            scores.append(float(n - i) if hit.score is None else float(hit.score))
            nodes.append(hit.node)
            if len(ids) == k:
                break
        return ids, scores, nodes

    # -- searching ---------------------------------------------------------------------------------------------
    def _retriever_for(self, k: int) -> Any:
        """The wrapped retriever, on a copy set to return ``k`` results when it has ``similarity_top_k``."""
        if not self.sets_top_k:
            return self.retriever
        if self.retriever.similarity_top_k == k:
            return self.retriever
        sized = copy.copy(self.retriever)
        sized.similarity_top_k = k
        return sized

    async def _gather(self, queries: Sequence[str], k: int, convert: Callable[[str, list[Any]], T]) -> list[T]:
        """``convert(query, hits)`` of LlamaIndex's answer (``NodeWithScore`` list) to every query, through its
        ``aretrieve``, at most ``max_concurrency`` queries in flight. Each answer is converted as soon as it comes,
        so LlamaIndex's node objects do not pile up until the last query is answered (and an error shows early)."""
        retriever = self._retriever_for(k)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(query: str) -> T:
            async with gate:
                hits = list(await retriever.aretrieve(query))
            return convert(query, hits)

        return list(await asyncio.gather(*(one(q) for q in queries)))

    def _as_results(self, query: str, hits: list[Any], k: int) -> list[RetrievalResult]:
        return [RetrievalResult(doc_id=doc_id, score=score,
                                metadata={**(getattr(node, "metadata", None) or {}), "text": node.get_content()})
                for doc_id, score, node in zip(*self._ranking(query, hits, k), strict=True)]

    def _as_columns(self, query: str, hits: list[Any], k: int) -> RankedColumns:
        ids, scores, nodes = self._ranking(query, hits, k)
        return RankedColumns(ids, np.array(scores, dtype=np.float64), [node.get_content() for node in nodes])

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The native path: LlamaIndex's ``aretrieve``, at most ``max_concurrency`` queries in flight."""
        if not queries:
            return []
        return await self._gather(queries, k, lambda query, hits: self._as_results(query, hits, k))

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """What the evaluator reads: ids, scores and texts as columns, no result object (nor metadata copy) per
        node; the same search and ranking as :meth:`abatch_retrieve`."""
        if not queries:
            return []
        return run_sync(self._gather(queries, k, lambda query, hits: self._as_columns(query, hits, k)))

    def config(self) -> dict[str, Any]:
        wrapped = self.retriever
        return {
            "name": self.name,
            "wraps": f"{type(wrapped).__module__}.{type(wrapped).__qualname__}",
            "id_key": self.id_key,
            "max_concurrency": self.max_concurrency,
            "k": "similarity_top_k" if self.sets_top_k else "fixed",
            "allow_fewer": self.allow_fewer,
            "ids": self.ids,
        }


def create_llamaindex_retriever(
    object: str | Any,
    id_key: str | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    allow_fewer: bool = False,
    ids: str = "node",
) -> LlamaIndexRetriever:
    """The ``llamaindex`` retriever: ``object`` is a LlamaIndex retriever or index, or ``"module:attribute"``."""
    target = load_object(object, "llamaindex retriever") if isinstance(object, str) else object
    return LlamaIndexRetriever(
        target, id_key=id_key, max_concurrency=max_concurrency, allow_fewer=allow_fewer, ids=ids
    )
