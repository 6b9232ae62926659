"""Retriever adapters: for callables, precomputed runs and foreign objects (the contract is
:mod:`evret_core.contracts.retrieve`)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import (
    RetrievalResult,
    Retriever,
    _await,
    call_batch_retrieve,
    coerce_results,
)
from evret_core.io.runs import rank_key


class _AsyncOnlyRetriever(Retriever):
    """Wraps a foreign object that has only ``aretrieve``/``abatch_retrieve``."""

    name = "async"

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def aretrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return coerce_results(await self.inner.aretrieve(query, k), f"{type(self.inner).__name__}.aretrieve")

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        if hasattr(self.inner, "abatch_retrieve"):
            return list(await self.inner.abatch_retrieve(list(queries), k))
        return list(await asyncio.gather(*(self.aretrieve(query, k) for query in queries)))

    def config(self) -> dict[str, Any]:
        return _inner_config(self.inner)


class _SyncOnlyRetriever(Retriever):
    """Wraps a foreign object that has ``retrieve(query, k)`` or ``batch_retrieve(queries, k)`` but not both (and
    is no :class:`Retriever`): the missing one is built from the other, and every result is checked."""

    name = "object"

    def __init__(self, inner: Any) -> None:
        method = "retrieve" if hasattr(inner, "retrieve") else "batch_retrieve"
        try:
            inspect.signature(getattr(inner, method)).bind("query", 10)
        except TypeError:
            raise EvretError(f"cannot use {type(inner).__name__} as a retriever: its {method} does not take "
                             f"({'query' if method == 'retrieve' else 'queries'}, k)") from None
        except ValueError:  # no signature to read (a builtin): the call will tell
            pass
        self.inner = inner

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        if not hasattr(self.inner, "retrieve"):
            return self.batch_retrieve([query], k)[0]
        result = self.inner.retrieve(query, k)
        if inspect.isawaitable(result):
            from evret_core.contracts.aio import run_sync

            result = run_sync(_await(result))
        return coerce_results(result, f"{type(self.inner).__name__}.retrieve")

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        if not hasattr(self.inner, "batch_retrieve"):
            return [self.retrieve(query, k) for query in queries]
        where = f"{type(self.inner).__name__}.batch_retrieve"
        return [coerce_results(results, where) for results in call_batch_retrieve(self.inner, queries, k)]

    def config(self) -> dict[str, Any]:
        return _inner_config(self.inner)


def _inner_config(inner: Any) -> dict[str, Any]:
    inner_config = getattr(inner, "config", None)
    return inner_config() if callable(inner_config) else {"name": type(inner).__name__}


class CallableRetriever(Retriever):
    """Wraps a plain function ``(query, k) -> list[RetrievalResult | dict]``."""

    name = "callable"

    def __init__(self, fn: Callable[[str, int], Any]) -> None:
        self.fn = fn

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        result = self.fn(query, k)
        if inspect.isawaitable(result):
            from evret_core.contracts.aio import run_sync

            result = run_sync(_await(result))
        return coerce_results(result, f"retriever function {getattr(self.fn, '__name__', self.fn)!r}")

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "function": getattr(self.fn, "__qualname__", repr(self.fn))}


class PrecomputedRetriever(Retriever):
    """A run computed elsewhere: query id -> ranked results (or doc id -> score)."""

    name = "precomputed"

    def __init__(self, run: Mapping[str, Any]) -> None:
        from evret_core.io.runcolumns import ColumnarRun

        # a run read as columns stays columns (its str ids and dicts are made per query when asked for); a dict
        # keyed by str is used as is (no copy of a million-query run); other keys become str
        plain = isinstance(run, ColumnarRun) or (type(run) is dict and all(type(qid) is str for qid in run))
        self.run: Mapping[str, Any] = run if plain else {str(qid): results for qid, results in run.items()}

    def results_for(self, query_id: str, k: int) -> list[RetrievalResult]:
        if query_id not in self.run:
            return []
        raw = self.run[query_id]
        if isinstance(raw, Mapping):
            ranked = sorted(raw.items(), key=lambda item: (-float(item[1]), rank_key(item[0])))
            results = [RetrievalResult(doc_id=str(d), score=float(s)) for d, s in ranked]
        else:
            results = coerce_results(raw, f"precomputed run, query {query_id!r}")
        return results[:k]

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        raise EvretError("a precomputed run answers by query id, not query text")


def resolve_retriever(obj: Any) -> Retriever | Any:
    """Turn what a user passed as ``retriever`` into something with ``batch_retrieve``.

    Accepts an Evret retriever (anything with both ``retrieve`` and ``batch_retrieve``), an object with only one of
    them or only the async ``aretrieve``/``abatch_retrieve`` (the others are built from it), a precomputed run (a
    mapping of query id to results), a plain callable ``(query, k)``, or any object a plugin's ``adapt_retriever``
    knows (asked before an object with only one method, or only the async ones, is wrapped).
    """
    if obj is None:
        raise EvretError("no retriever given")
    if isinstance(obj, Retriever) or (hasattr(obj, "batch_retrieve") and hasattr(obj, "retrieve")):
        return obj
    if isinstance(obj, Mapping):
        return PrecomputedRetriever(obj)
    from evret_core.plugins.loading import get_registry

    # adapters first: a foreign retriever may have an ``aretrieve(query)`` of its own (LlamaIndex's takes no k)
    adapted = get_registry().adapt(obj)
    if adapted is not None:
        return adapted
    if not callable(obj) and (hasattr(obj, "aretrieve") or hasattr(obj, "abatch_retrieve")):
        return _AsyncOnlyRetriever(obj)
    if hasattr(obj, "retrieve") or hasattr(obj, "batch_retrieve"):
        return _SyncOnlyRetriever(obj)
    if callable(obj):
        return CallableRetriever(obj)
    raise EvretError(
        f"cannot use {type(obj).__name__} as a retriever: give an object with retrieve(query, k) (or "
        f"batch_retrieve(queries, k), or their async forms), a function "
        f"(query, k) -> results, a precomputed run {{query_id: results}}, or install the plugin that adapts it "
        f"(e.g. evret-langchain for LangChain retrievers)"
    )
