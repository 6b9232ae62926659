"""The retriever contract, and adapters for callables, precomputed runs and foreign objects."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.data.models import RetrievalResult
from evret_core.io.runs import rank_key


@dataclass(frozen=True)
class RankedColumns:
    """One query's ranked results as columns: ``ids`` best first, their ``scores`` and optionally their ``texts``
    (sequences or numpy arrays of equal length). What :meth:`Retriever.batch_retrieve_columns` returns: no object
    per retrieved document, so large runs stay cheap."""

    ids: Sequence[str]
    scores: Sequence[float] | np.ndarray
    texts: Sequence[str | None] | None = None

    def __post_init__(self) -> None:
        if len(self.scores) != len(self.ids) or (self.texts is not None and len(self.texts) != len(self.ids)):
            raise EvretError(
                f"RankedColumns: {len(self.ids)} ids, {len(self.scores)} scores and "
                f"{'no' if self.texts is None else len(self.texts)} texts must have the same length"
            )

    def __len__(self) -> int:
        return len(self.ids)

    def head(self, k: int) -> RankedColumns:
        """The top ``k`` rows."""
        if len(self.ids) <= k:
            return self
        return RankedColumns(self.ids[:k], self.scores[:k], None if self.texts is None else self.texts[:k])

    def to_results(self) -> list[RetrievalResult]:
        """The rows as :class:`RetrievalResult` objects (for code that wants objects)."""
        texts = self.texts if self.texts is not None else [None] * len(self.ids)
        return [RetrievalResult(doc_id=str(d), score=float(s), metadata={} if t is None else {"text": t})
                for d, s, t in zip(self.ids, _floats(self.scores), texts, strict=True)]

    @classmethod
    def from_results(cls, results: Sequence[RetrievalResult]) -> RankedColumns:
        """Columns of a list of :class:`RetrievalResult` objects."""
        return cls([r.doc_id for r in results], np.fromiter((r.score for r in results), np.float64, len(results)),
                   [r.text for r in results])


def _floats(values: Sequence[float] | np.ndarray) -> list[float]:
    return values.tolist() if isinstance(values, np.ndarray) else [float(v) for v in values]


class Retriever:
    """Anything that answers a query with ranked :class:`RetrievalResult`s.

    Implement :meth:`retrieve` (or the async :meth:`aretrieve`); override :meth:`batch_retrieve` (or
    :meth:`abatch_retrieve`) when many queries at once are cheaper. The sync and async sides fill each other in:
    a subclass that implements only the async methods is usable from sync code (through
    :func:`evret_core.contracts.aio.run_sync`, also inside a running event loop), and the other way round.
    """

    name: str = "retriever"

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        """The top ``k`` results for ``query``, best first."""
        if _overrides(self, "aretrieve") or _overrides(self, "abatch_retrieve"):
            from evret_core.contracts.aio import run_sync

            return run_sync(self.abatch_retrieve([query], k))[0]
        if _overrides(self, "batch_retrieve"):
            return call_batch_retrieve(self, [query], k)[0]  # type: ignore[no-any-return]
        raise NotImplementedError(f"{type(self).__name__} implements neither retrieve nor aretrieve")

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """One ranked list per query, in order; the default loops over :meth:`retrieve` (or gathers the async
        methods when only those are implemented)."""
        if not _overrides(self, "retrieve") and (_overrides(self, "aretrieve") or _overrides(self, "abatch_retrieve")):
            from evret_core.contracts.aio import run_sync

            return run_sync(self.abatch_retrieve(queries, k))
        return [self.retrieve(query, k) for query in queries]

    async def aretrieve(self, query: str, k: int) -> list[RetrievalResult]:
        """Async :meth:`retrieve`; the default asks :meth:`abatch_retrieve` when only that is implemented, else
        calls the sync method."""
        if _overrides(self, "abatch_retrieve") and not _overrides(self, "retrieve"):
            return (await self.abatch_retrieve([query], k))[0]
        return self.retrieve(query, k)

    async def abatch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        """Async :meth:`batch_retrieve`; the default runs :meth:`aretrieve` for every query concurrently."""
        if not _overrides(self, "aretrieve"):
            return self.batch_retrieve(queries, k)
        return list(await asyncio.gather(*(self.aretrieve(query, k) for query in queries)))

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """One :class:`RankedColumns` per query, in order: what the evaluator asks for. The default converts
        :meth:`batch_retrieve`'s objects; retrievers that produce arrays (bm25, dense, vector stores) override it
        and build :meth:`batch_retrieve` from it."""
        return [RankedColumns.from_results(coerce_results(results, f"retriever {type(self).__name__}"))
                for results in call_batch_retrieve(self, queries, k)]

    def config(self) -> dict[str, Any]:
        """Settings that identify this retriever in the results manifest."""
        return {"name": self.name}


def _overrides(obj: Any, method: str) -> bool:
    return getattr(type(obj), method, None) is not getattr(Retriever, method)


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


def call_batch_retrieve(retriever: Any, queries: Sequence[str], k: int) -> list[Any]:
    """``retriever.batch_retrieve(queries, k)``, run to completion when it is a coroutine function."""
    result = retriever.batch_retrieve(list(queries), k)
    if inspect.isawaitable(result):
        from evret_core.contracts.aio import run_sync

        result = run_sync(_await(result))
    return list(result)


async def _await(awaitable: Any) -> Any:
    return await awaitable


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


def coerce_results(raw: Any, where: str) -> list[RetrievalResult]:
    """Accept RetrievalResult objects or dicts with doc_id/score/metadata (or text)."""
    if raw is None:
        raise EvretError(f"{where} returned None instead of a list of results")
    results = []
    for i, item in enumerate(raw):
        if isinstance(item, RetrievalResult):
            results.append(item)
        elif isinstance(item, Mapping):
            data = dict(item)
            metadata = dict(data.pop("metadata", {}) or {})
            if "text" in data:
                metadata.setdefault("text", data.pop("text"))
            doc_id = data.pop("doc_id", data.pop("id", None))
            if doc_id is None or str(doc_id) == "":
                raise EvretError(f"{where}: result {i} has no 'doc_id'")
            try:
                results.append(RetrievalResult(doc_id=str(doc_id),
                                               score=float(data.pop("score", 0.0)), metadata=metadata))
            except (TypeError, ValueError) as exc:
                raise EvretError(f"{where}: result {i} is malformed: {exc}") from None
        else:
            raise EvretError(f"{where}: result {i} is a {type(item).__name__}, expected RetrievalResult or dict")
    return results


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
