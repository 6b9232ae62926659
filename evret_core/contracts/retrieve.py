"""The retriever contract: the :class:`Retriever` base class, what it returns (:class:`RetrievalResult` objects, or
:class:`RankedColumns` for many at once) and the checks every adapter applies to what a foreign retriever returns
(:func:`coerce_results`). numpy is imported inside the functions that use it, so importing this module loads none."""

from __future__ import annotations

import gc
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.values import Value, as_dict, as_float, as_str, value_type

if TYPE_CHECKING:
    import numpy as np

__all__ = ["RankedColumns", "RetrievalResult", "Retriever", "call_batch_retrieve", "coerce_results"]


_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


@value_type(kw_only=True, init=False)
class RetrievalResult(Value):
    """One retrieved document: its id, the retriever's score and metadata; the text is ``metadata["text"]``.

    Given other types, ``doc_id`` takes a number written out (``7`` -> ``"7"``; not a bool), ``score`` any real
    number or numeric string, ``metadata`` any mapping (a ``dict`` is kept as given, another mapping becomes one);
    anything else raises ``TypeError``/``ValueError``.
    """

    doc_id: str
    score: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def __init__(self, *, doc_id: str, score: float = 0.0, metadata: Mapping[str, Any] = _NO_METADATA) -> None:
        # written by hand, not generated: retrievers make millions of these, and setting ``__dict__`` directly
        # when the types are already right costs about two thirds of a generated frozen ``__init__``
        if metadata is _NO_METADATA:
            metadata = {}
        if not (type(doc_id) is str and type(score) is float and type(metadata) is dict):
            doc_id = as_str(doc_id, "doc_id", numbers=True)
            score = as_float(score, "score")
            if type(metadata) is not dict:
                metadata = as_dict(metadata, "metadata", numbers=True)
        values = self.__dict__
        values["doc_id"] = doc_id
        values["score"] = score
        values["metadata"] = metadata

    @property
    def text(self) -> str | None:
        """The retrieved document's text, or None when the retriever gave none."""
        value = self.metadata.get("text")
        return None if value is None else str(value)


@value_type
class RankedColumns(Value):
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

    def to_results(self, metadata: Sequence[dict[str, Any]] | None = None) -> list[RetrievalResult]:
        """The rows as :class:`RetrievalResult` objects (for code that wants objects): ids made ``str``, scores
        ``float``. ``metadata`` (one dict per row, the text in it as ``"text"``) is each result's metadata as given,
        not copied: what an adapter's object path passes, the dicts built from what its backend returned. Without
        it a row's metadata is ``{"text": its text}``, or empty when it has none."""
        if metadata is None:
            texts = self.texts if self.texts is not None else [None] * len(self.ids)
            metadata = [{} if t is None else {"text": t} for t in texts]
        elif len(metadata) != len(self.ids):
            raise EvretError(f"RankedColumns.to_results: {len(metadata)} metadata dicts for {len(self.ids)} rows")
        ids = self.ids.tolist() if hasattr(self.ids, "tolist") else self.ids
        return _typed_results(list(map(str, ids)), _floats(self.scores), metadata)

    @staticmethod
    def batch_to_results(
        answers: Iterable[tuple[RankedColumns, Sequence[dict[str, Any]] | None]],
    ) -> list[list[RetrievalResult]]:
        """:meth:`to_results` of each query's ``(columns, metadata)``, for an adapter's whole ``batch_retrieve``:
        ``answers`` is best a generator doing the backend's work and building the metadata dicts, so that all of
        it runs here, where the garbage collector leaves aside the objects that existed before the call and those
        of each query done (see :func:`_objects_set_aside`)."""
        results: list[list[RetrievalResult]] = []
        with _objects_set_aside() as set_aside:
            for columns, metadata in answers:
                results.append(columns.to_results(metadata=metadata))
                set_aside()
        return results

    @classmethod
    def from_results(cls, results: Sequence[RetrievalResult]) -> RankedColumns:
        """Columns of a list of :class:`RetrievalResult` objects."""
        import numpy as np

        return cls([r.doc_id for r in results], np.fromiter((r.score for r in results), np.float64, len(results)),
                   [r.text for r in results])


@contextmanager
def _objects_set_aside() -> Iterator[Callable[[], None]]:
    """Inside: the objects that existed before are set aside from the garbage collector (``gc.freeze``), and so
    are those that exist whenever the function it gives is called; after: all are put back (``gc.unfreeze``, into
    the oldest generation). Building a batch's results makes one tracked object per retrieved document (100,000
    and more), whose allocations trigger collections, full ones among them that walk the whole process heap (the
    caller's objects, every imported module, the results so far); with each query's results set aside once built,
    a collection during the call sees one query's objects at most. Cycles among the objects set aside (the
    caller's young ones too, put back as old ones) are collected by the next full collection instead. A process
    that froze objects itself (``gc.get_freeze_count()``), or has the collector switched off, is left as it is."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield _nothing
        return
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def _nothing() -> None:
    return None


def _floats(values: Sequence[float] | np.ndarray) -> list[float]:
    import numpy as np

    if isinstance(values, np.ndarray):  # tolist() gives Python floats of a float array, ints of an int one
        return values.astype(np.float64, copy=False).tolist()  # type: ignore[no-any-return]
    return [float(v) for v in values]


def _typed_results(ids: list[str], scores: list[float], metadata: Iterable[Any]) -> list[RetrievalResult]:
    """:class:`RetrievalResult` objects of ids already ``str`` and scores already ``float``: each is what
    ``RetrievalResult(doc_id=..., score=..., metadata=...)`` stores, without the checks that would find nothing
    to convert (a metadata that is not a ``dict`` still goes through them). The object path of the vector-store
    adapters makes one per retrieved document, so this is their cost per result."""
    new, assign = object.__new__, object.__setattr__
    results: list[RetrievalResult] = []
    append = results.append
    for doc_id, score, meta in zip(ids, scores, metadata, strict=True):
        if type(meta) is not dict:
            append(RetrievalResult(doc_id=doc_id, score=score, metadata=meta))
            continue
        # object.__setattr__, as __init__'s checks would leave them: the frozen class refuses its own setattr,
        # and the values stay in the instance (no __dict__ made for it)
        result = new(RetrievalResult)
        assign(result, "doc_id", doc_id)
        assign(result, "score", score)
        assign(result, "metadata", meta)
        append(result)
    return results


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
        import asyncio  # not at the top: listing plugins imports this module and must not load asyncio

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


def call_batch_retrieve(retriever: Any, queries: Sequence[str], k: int) -> list[Any]:
    """``retriever.batch_retrieve(queries, k)``, run to completion when it is a coroutine function."""
    result = retriever.batch_retrieve(list(queries), k)
    if inspect.isawaitable(result):
        from evret_core.contracts.aio import run_sync

        result = run_sync(_await(result))
    return list(result)


async def _await(awaitable: Any) -> Any:
    return await awaitable


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
