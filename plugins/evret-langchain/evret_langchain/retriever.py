"""Evaluate a LangChain retriever or vector store where it lives: no re-indexing, no copy of the corpus."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from evret_core.sdk import EvretError, RankedColumns, RetrievalResult, Retriever, load_object, run_sync

DEFAULT_MAX_CONCURRENCY = 8
T = TypeVar("T")


def is_langchain_object(obj: Any) -> bool:
    """True when ``obj`` is a LangChain object, decided without importing langchain-core."""
    return any(getattr(cls, "__module__", "").startswith("langchain") for cls in type(obj).__mro__)


class LangChainRetriever(Retriever):
    """Wraps a LangChain ``BaseRetriever`` or ``VectorStore`` as an Evret retriever.

    Ids come from ``Document.id``, or from ``metadata[id_key]`` when ``id_key`` is given; the text from
    ``page_content``; the rest of the document's metadata is kept. Queries run concurrently through the async API,
    at most ``max_concurrency`` at a time. ``k`` reaches the retriever when it has a way to take it
    (``search_kwargs`` or a ``k`` field); results are always cut to ``k``.
    """

    name = "langchain"

    def __init__(
        self,
        retriever: Any,
        id_key: str | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        search_kwargs: dict[str, Any] | None = None,
        use_scores: bool = True,
    ) -> None:
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

        if int(max_concurrency) < 1:
            raise EvretError(f"langchain retriever: option 'max_concurrency' must be at least 1, got {max_concurrency}")
        self.id_key = id_key
        self.max_concurrency = int(max_concurrency)
        self.use_scores = use_scores
        self.search_kwargs: dict[str, Any] = dict(search_kwargs or {})
        self.vectorstore: Any = None
        self.retriever: Any = None
        if isinstance(retriever, VectorStore):
            self.vectorstore = retriever
        elif isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity":
            # the store itself gives scores that the retriever drops; its search_kwargs (filters...) still apply
            self.vectorstore = retriever.vectorstore
            self.search_kwargs = {**retriever.search_kwargs, **self.search_kwargs}
        elif isinstance(retriever, BaseRetriever):
            self.retriever = retriever
        else:
            raise EvretError(
                f"langchain retriever: expected a LangChain BaseRetriever or VectorStore, got {type(retriever).__name__}"
            )
        self.search_kwargs.pop("k", None)
        self._score_mode: str | None = None

    # -- ids and texts -----------------------------------------------------------------------------------------
    def _doc_id(self, doc: Any, rank: int, query: str) -> Any:
        if self.id_key is not None:
            metadata = getattr(doc, "metadata", None) or {}
            if metadata.get(self.id_key) is None:
                raise EvretError(
                    f"langchain retriever: document at rank {rank} for query {query[:60]!r} has no metadata key "
                    f"{self.id_key!r} (option 'id_key'); its metadata keys are {sorted(metadata) or 'none'}"
                )
            return metadata[self.id_key]
        doc_id = getattr(doc, "id", None)
        if doc_id is None or doc_id == "":
            raise EvretError(
                f"langchain retriever: document at rank {rank} for query {query[:60]!r} has no Document.id; "
                f"set option 'id_key' to the metadata key that holds your document ids "
                f"(metadata keys: {sorted(getattr(doc, 'metadata', None) or {}) or 'none'})"
            )
        return doc_id

    def _ranking(self, query: str, pairs: Sequence[tuple[Any, float | None]], k: int) -> list[tuple[str, float, Any]]:
        """(id, score, document) best first, at most ``k``; both result paths read this."""
        pairs = list(pairs)[:k]
        # without a score from LangChain, a descending rank score keeps the order in exported runs
        return [(str(self._doc_id(doc, i + 1, query)), float(len(pairs) - i) if score is None else float(score), doc)
                for i, (doc, score) in enumerate(pairs)]

    # -- searching ---------------------------------------------------------------------------------------------
    async def _search_store(self, query: str, k: int) -> list[tuple[Any, float | None]]:
        store = self.vectorstore
        kwargs = dict(self.search_kwargs)
        # the store's own scores (similarity or distance, as the store defines them); the ranking is the store's
        # order either way, so no normalisation to "relevance" is needed, and none of its warnings are raised
        if self.use_scores and self._score_mode != "none":
            try:
                pairs = await store.asimilarity_search_with_score(query, k=k, **kwargs)
                self._score_mode = "store"
                return list(pairs)
            except NotImplementedError:
                self._score_mode = "none"
        docs = await store.asimilarity_search(query, k=k, **kwargs)
        return [(doc, None) for doc in docs]

    def _retriever_for(self, k: int) -> tuple[Any, dict[str, Any]]:
        """The wrapped retriever set up to return ``k`` documents, when it exposes a way to ask for them."""
        r = self.retriever
        search_kwargs = getattr(r, "search_kwargs", None)
        fields = getattr(type(r), "model_fields", {})
        if isinstance(search_kwargs, dict) and "search_kwargs" in fields:
            return r.model_copy(update={"search_kwargs": {**search_kwargs, **self.search_kwargs, "k": k}}), {}
        if "k" in fields:
            return r.model_copy(update={"k": k}), {}
        return r, {}

    async def _gather(self, queries: Sequence[str], k: int,
                      convert: Callable[[str, list[tuple[Any, float | None]]], T]) -> list[T]:
        """``convert(query, pairs)`` of LangChain's answer ((document, score or None) pairs) to every query, through
        its async API, at most ``max_concurrency`` queries in flight; a vector store's answers are converted as
        they come, so its documents do not pile up until the last query is answered."""
        if self.vectorstore is not None:
            gate = asyncio.Semaphore(self.max_concurrency)

            async def one(query: str) -> T:
                async with gate:
                    pairs = await self._search_store(query, k)
                return convert(query, pairs)

            return list(await asyncio.gather(*(one(q) for q in queries)))
        retriever, _ = self._retriever_for(k)
        docs_lists = await retriever.abatch(list(queries), config={"max_concurrency": self.max_concurrency})
        return [convert(q, [(doc, None) for doc in docs]) for q, docs in zip(queries, docs_lists, strict=True)]

    def _as_results(self, query: str, pairs: list[tuple[Any, float | None]], k: int) -> list[RetrievalResult]:
        return [RetrievalResult(doc_id=doc_id, score=score,
                                metadata={**(getattr(doc, "metadata", None) or {}), "text": doc.page_content})
                for doc_id, score, doc in self._ranking(query, pairs, k)]

    def _as_columns(self, query: str, pairs: list[tuple[Any, float | None]], k: int) -> RankedColumns:
        ranking = self._ranking(query, pairs, k)
        return RankedColumns([doc_id for doc_id, _, _ in ranking], np.array([s for _, s, _ in ranking], np.float64),
                             [doc.page_content for _, _, doc in ranking])

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The native path: LangChain's async API, at most ``max_concurrency`` queries in flight."""
        if not queries:
            return []
        return await self._gather(queries, k, lambda query, pairs: self._as_results(query, pairs, k))

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """What the evaluator reads: ids, scores and texts as columns, no result object (nor metadata copy) per
        document; the same search and ranking as :meth:`abatch_retrieve`."""
        if not queries:
            return []
        return run_sync(self._gather(queries, k, lambda query, pairs: self._as_columns(query, pairs, k)))

    def config(self) -> dict[str, Any]:
        wrapped = self.vectorstore if self.vectorstore is not None else self.retriever
        return {
            "name": self.name,
            "wraps": f"{type(wrapped).__module__}.{type(wrapped).__qualname__}",
            "id_key": self.id_key,
            "max_concurrency": self.max_concurrency,
            "search_kwargs": {k: repr(v) for k, v in self.search_kwargs.items()},
            "scores": self._score_mode if self.vectorstore is not None else "rank",
        }


def create_langchain_retriever(
    object: str | Any,
    id_key: str | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    search_kwargs: dict[str, Any] | None = None,
    use_scores: bool = True,
) -> LangChainRetriever:
    """The ``langchain`` retriever: ``object`` is a LangChain retriever/vector store, or ``"module:attribute"``."""
    target = load_object(object, "langchain retriever") if isinstance(object, str) else object
    return LangChainRetriever(target, id_key=id_key, max_concurrency=max_concurrency,
                              search_kwargs=search_kwargs, use_scores=use_scores)
