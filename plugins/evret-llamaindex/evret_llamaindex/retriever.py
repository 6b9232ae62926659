"""Evaluate a LlamaIndex retriever (or index) where it lives: no re-indexing, no copy of the corpus."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

from evret_core.sdk import EvretError, RetrievalResult, Retriever, check_bool, load_object

DEFAULT_MAX_CONCURRENCY = 8


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
    def _to_result(self, hit: Any, score: float, rank: int, query: str) -> RetrievalResult:
        node = hit.node
        metadata = dict(getattr(node, "metadata", None) or {})
        if self.id_key is not None:
            if metadata.get(self.id_key) is None:
                raise EvretError(
                    f"llamaindex retriever: node at rank {rank} for query {query[:60]!r} has no metadata key "
                    f"{self.id_key!r} (option 'id_key'); its metadata keys are {sorted(metadata) or 'none'}"
                )
            doc_id = metadata[self.id_key]
        elif self.ids == "document":
            doc_id = node.ref_doc_id
            if doc_id is None:
                raise EvretError(
                    f"llamaindex retriever: node at rank {rank} for query {query[:60]!r} has no source document "
                    f"(option 'ids' is 'document'); use ids='node' or option 'id_key'"
                )
        else:
            doc_id = node.node_id
        metadata["text"] = node.get_content()
        return RetrievalResult(doc_id=str(doc_id), score=float(score), metadata=metadata)

    def _results(self, query: str, hits: Sequence[Any], k: int) -> list[RetrievalResult]:
        if len(hits) < k and not self.sets_top_k and not self.allow_fewer:
            raise EvretError(
                f"llamaindex retriever: {type(self.retriever).__name__} returned {len(hits)} results for query "
                f"{query[:60]!r} but k is {k}, and it has no similarity_top_k to ask for more; build it to return "
                f"at least {k} results, or set option 'allow_fewer' to evaluate the shorter lists"
            )
        results = [
            # without a score from LlamaIndex, a descending rank score keeps the order in exported runs
            self._to_result(hit, float(len(hits) - i) if hit.score is None else hit.score, i + 1, query)
            for i, hit in enumerate(hits)
        ]
        if self.ids == "document" or self.id_key is not None:
            # several chunks of one document: the document is ranked where its best chunk is
            best: dict[str, RetrievalResult] = {}
            for result in results:
                best.setdefault(result.doc_id, result)
            results = list(best.values())
        return results[:k]

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

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The native path: LlamaIndex's ``aretrieve``, at most ``max_concurrency`` queries in flight."""
        if not queries:
            return []
        retriever = self._retriever_for(k)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(query: str) -> list[Any]:
            async with gate:
                return list(await retriever.aretrieve(query))

        answers = await asyncio.gather(*(one(q) for q in queries))
        return [self._results(q, hits, k) for q, hits in zip(queries, answers, strict=True)]

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
