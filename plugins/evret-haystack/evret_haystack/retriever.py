"""Evaluate a Haystack retriever component or pipeline where it lives: no re-indexing, no copy of the corpus."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.sdk import (
    EvretError,
    QueryVectors,
    RankedColumns,
    RetrievalResult,
    Retriever,
    check_bool,
    load_object,
    run_sync,
)
from evret_haystack.wiring import OWNER, Wiring

DEFAULT_MAX_CONCURRENCY = 8



def _filter_error(exc: BaseException) -> BaseException | None:
    """Haystack's ``FilterError`` behind ``exc`` (a pipeline wraps its components' errors), if any."""
    from haystack.errors import FilterError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, FilterError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class HaystackRetriever(Retriever):
    """Wraps a Haystack retriever component (``InMemoryBM25Retriever``, ``InMemoryEmbeddingRetriever``, any
    ``@component`` with a ``documents`` output) or a whole ``Pipeline`` whose output holds documents.

    The query goes to ``query_input`` (a component's socket, ``"query"``; a pipeline's ``"component.socket"``,
    by default every open input named ``query`` or ``text``, e.g. ``text_embedder.text``); a ``query_embedding``
    input gets the query's vector from ``embedding`` or ``query_embeddings``. ``k`` goes to ``top_k_input`` (by
    default the documents' component's ``top_k``); ``filters`` to the ``filters`` input of that component; ``inputs``
    are fixed inputs of every run. The documents are read from ``documents_output`` (by default the one ``documents``
    output). Ids are ``Document.id``, or ``Document.meta[id_key]`` (then a document is ranked at its best chunk and
    its other chunks are dropped); the text is ``Document.content`` and ``Document.meta`` is kept; scores are
    Haystack's, or rank scores when it gives none. Queries run through ``run_async`` where Haystack has it (at most
    ``max_concurrency`` at a time), else through ``run``, one by one; ``max_concurrency=1`` runs ``run`` one by one
    (for in-process stores, where Haystack's async engine only adds its own cost).

    The k rule: results are cut to ``k``. When ``k`` reaches the object (a ``top_k`` input), fewer results mean the
    store had no more. When it cannot, a query with fewer than ``k`` results is an ``EvretError`` (its metrics at k
    would be computed on a shorter list than asked) unless ``allow_fewer=True``.
    """

    name = "haystack"

    def __init__(
        self,
        obj: Any,
        *,
        query_input: str | Sequence[str] | None = None,
        documents_output: str | None = None,
        top_k_input: str | None = None,
        filters: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        id_key: str | None = None,
        embedding: Any = None,
        query_embeddings: Mapping[str, Sequence[float]] | None = None,
        allow_fewer: bool = False,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        if int(max_concurrency) < 1:
            raise EvretError(f"{OWNER}: option 'max_concurrency' must be at least 1, got {max_concurrency}")
        if filters is not None and not isinstance(filters, Mapping):
            raise EvretError(f"{OWNER}: option 'filters' must be a Haystack filter (a mapping), "
                             f"got {type(filters).__name__}")
        self.wiring = Wiring(obj, query_input, documents_output, top_k_input, filters, inputs)
        self.obj: Any = obj
        self.id_key = id_key
        self.allow_fewer = check_bool(allow_fewer, f"{OWNER}: option 'allow_fewer'")
        self.max_concurrency = int(max_concurrency)
        self.use_async = self.wiring.has_async and self.max_concurrency > 1
        self.vectors: QueryVectors | None = None
        sockets = ", ".join(self.wiring.describe()["query_input"])
        if self.wiring.vector_sockets:
            if embedding is None and query_embeddings is None:
                raise EvretError(f"{OWNER}: the query goes to {sockets}, a vector: set "
                                 f"option 'embedding' (the model the documents were embedded with) or "
                                 f"'query_embeddings', or evaluate a pipeline with its text embedder in front")
            self.vectors = QueryVectors(embedding, query_embeddings, OWNER)
        elif embedding is not None or query_embeddings is not None:
            raise EvretError(f"{OWNER}: options 'embedding' and 'query_embeddings' are for a query_embedding input; "
                             f"this {self.wiring.what} takes the query text at {sockets}")

    # -- documents to results ----------------------------------------------------------------------------------
    def _ranked(self, query: str, docs: list[Any], k: int) -> list[tuple[str, float, Any]]:
        """``(doc id, score, document)`` best first, at most ``k``: the one place ids, scores and the k rule live."""
        if len(docs) < k and self.wiring.top_k is None and not self.allow_fewer:
            raise EvretError(
                f"{OWNER}: the {self.wiring.what} returned {len(docs)} documents for query {query[:60]!r} but k is "
                f"{k}, and k reaches no top_k input (option 'top_k_input'); make it return at least {k}, or set "
                f"option 'allow_fewer' to evaluate the shorter lists"
            )
        ranked = []
        seen: set[str] = set()
        for rank, doc in enumerate(docs, 1):
            if self.id_key is None:
                doc_id = str(doc.id)
            else:
                meta = doc.meta or {}
                if meta.get(self.id_key) is None:
                    raise EvretError(
                        f"{OWNER}: document at rank {rank} for query {query[:60]!r} has no meta field "
                        f"{self.id_key!r} (option 'id_key'); its meta fields are {sorted(meta) or 'none'}"
                    )
                doc_id = str(meta[self.id_key])
                if doc_id in seen:
                    continue  # another chunk of a document already ranked at its best chunk
                seen.add(doc_id)
            # without a score from Haystack, a descending rank score keeps the order in exported runs
            ranked.append((doc_id, float(len(docs) - rank + 1) if doc.score is None else float(doc.score), doc))
            if len(ranked) == k:
                break
        return ranked

    def _results(self, query: str, docs: list[Any], k: int) -> list[RetrievalResult]:
        results = []
        for doc_id, score, doc in self._ranked(query, docs, k):
            metadata = dict(doc.meta or {})
            if doc.content is not None:
                metadata["text"] = doc.content
            results.append(RetrievalResult(doc_id=doc_id, score=score, metadata=metadata))
        return results

    def _raise_filter_error(self, exc: BaseException) -> None:
        """Haystack rejecting the filters is the user's input: an ``EvretError`` naming the options."""
        found = _filter_error(exc)
        if found is not None:
            raise EvretError(f"{OWNER}: the {self.wiring.what} rejected the filters (option 'filters' or "
                             f"'inputs'): {found}") from None

    # -- searching ---------------------------------------------------------------------------------------------
    def _payloads(self, queries: Sequence[str], k: int) -> list[dict[str, Any]]:
        vectors: list[list[float] | None] = (
            list(self.vectors(list(queries))) if self.vectors is not None else [None] * len(queries)
        )
        return [self.wiring.payload(q, v, k) for q, v in zip(queries, vectors, strict=True)]

    def _documents(self, queries: Sequence[str], k: int) -> list[list[Any]]:
        """Each query's documents: through ``run_async`` when Haystack has it (and ``max_concurrency`` is above 1),
        else ``run``, query by query."""
        if self.use_async:
            return run_sync(self._adocuments(queries, k))
        try:
            outputs = [self.wiring.run(p) for p in self._payloads(queries, k)]
        except Exception as exc:
            self._raise_filter_error(exc)
            raise
        return [self.wiring.documents(out, q) for q, out in zip(queries, outputs, strict=True)]

    async def _adocuments(self, queries: Sequence[str], k: int) -> list[list[Any]]:
        if not self.use_async:
            return self._documents(queries, k)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(payload: dict[str, Any]) -> Any:
            async with gate:
                return await self.wiring.arun(payload)

        try:
            outputs = await asyncio.gather(*(one(p) for p in self._payloads(queries, k)))
        except Exception as exc:
            self._raise_filter_error(exc)
            raise
        return [self.wiring.documents(out, q) for q, out in zip(queries, outputs, strict=True)]

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """One ranked list per query, each result with its text and ``Document.meta``."""
        if not queries:
            return []
        return [self._results(q, docs, k) for q, docs in zip(queries, self._documents(queries, k), strict=True)]

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """What the evaluator reads: ids, scores and texts as columns, without an object per document."""
        if not queries:
            return []
        columns = []
        for query, docs in zip(queries, self._documents(queries, k), strict=True):
            ranked = self._ranked(query, docs, k)
            columns.append(RankedColumns([r[0] for r in ranked], [r[1] for r in ranked],
                                         [r[2].content for r in ranked]))
        return columns

    async def aretrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return (await self.abatch_retrieve([query], k))[0]

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """The native path: ``run_async``, at most ``max_concurrency`` queries in flight (``run`` when Haystack
        offers no ``run_async`` or ``max_concurrency`` is 1)."""
        if not queries:
            return []
        docs = await self._adocuments(queries, k)
        return [self._results(q, d, k) for q, d in zip(queries, docs, strict=True)]

    def config(self) -> dict[str, Any]:
        wrapped = self.obj
        return {
            "name": self.name,
            "wraps": f"{type(wrapped).__module__}.{type(wrapped).__qualname__}",
            **self.wiring.describe(),
            "id_key": self.id_key,
            "embedding": None if self.vectors is None else self.vectors.label,
            "allow_fewer": self.allow_fewer,
            "max_concurrency": self.max_concurrency,
            "runs": "run_async" if self.use_async else "run",
        }


def create_haystack_retriever(
    object: str | Any,
    query_input: str | Sequence[str] | None = None,
    documents_output: str | None = None,
    top_k_input: str | None = None,
    filters: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    id_key: str | None = None,
    embedding: Any = None,
    query_embeddings: Mapping[str, Sequence[float]] | None = None,
    allow_fewer: bool = False,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
) -> HaystackRetriever:
    """The ``haystack`` retriever: ``object`` is a Haystack component or Pipeline, or ``"module:attribute"``."""
    target = load_object(object, OWNER) if isinstance(object, str) else object
    return HaystackRetriever(
        target, query_input=query_input, documents_output=documents_output, top_k_input=top_k_input,
        filters=filters, inputs=inputs, id_key=id_key, embedding=embedding, query_embeddings=query_embeddings,
        allow_fewer=allow_fewer, max_concurrency=max_concurrency,
    )
