"""The built-in retriever ``hybrid``: several registered retrievers, each asked for its top ``depth``, fused into one
ranking (:mod:`evret_core.retrieve.fusion`: ranx's methods and normalisations, vectorised)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult, Retriever
from evret_core.limits import MAX_DEPTH, check_int
from evret_core.retrieve.fusion import FusionSettings, fuse_columns

__all__ = ["HybridRetriever"]

_WHERE = "retriever 'hybrid'"


class HybridRetriever(Retriever):
    """Fuses the rankings of several registered retrievers for each query: ``retrievers`` is a list of tables of a
    registered ``name`` and its ``options``, each built by the component builder (handed ``dataset`` and
    ``corpus``). Each is asked for its top ``depth`` (at least the ``k`` asked of the hybrid), the rankings are
    fused (``method``, ``norm``, ``rrf_k``, ``weights``: :class:`~evret_core.retrieve.fusion.FusionSettings`) and
    the fused list is cut to ``k``; a document's text is the first retriever's that gave one. Every option, each
    retriever's name and options included, is checked before the first retriever is built (building one may index
    or encode a corpus)."""

    name = "hybrid"

    def __init__(
        self,
        retrievers: Any,
        method: str = "rrf",
        norm: str | None = "min-max",
        rrf_k: float = 60,
        weights: Sequence[float] | None = None,
        depth: int = 100,
        dataset: Any = None,
        corpus: Any = None,
    ) -> None:
        from evret_core.plugins.builder import build, check_options

        specs = _specs(retrievers)
        self.settings = FusionSettings.check(method, norm, weights, rrf_k, n_runs=len(specs), where=_WHERE)
        self.depth = check_int(depth, f"{_WHERE}: option depth", 1, MAX_DEPTH)
        for i, (name, options) in enumerate(specs):  # an unknown name or option fails here, before any is built
            check_options(kinds.RETRIEVER, name, options, _sources(i, options))
        if isinstance(corpus, str | PathLike):  # read once, shared by every retriever that takes a corpus
            from evret_core.io.corpus import read_corpus

            corpus = read_corpus(str(corpus))
        elif corpus is not None and not isinstance(corpus, Mapping):
            raise EvretError(f"{_WHERE}: option corpus must be a file path or a mapping, "
                             f"got {type(corpus).__name__}")
        self.labels = [name for name, _ in specs]
        self.retrievers = [build(kinds.RETRIEVER, name, options, sources=_sources(i, options), dataset=dataset,
                                 corpus=corpus) for i, (name, options) in enumerate(specs)]

    def config(self) -> dict[str, Any]:
        parts = []
        for label, retriever in zip(self.labels, self.retrievers, strict=True):
            config = getattr(retriever, "config", None)
            parts.append(config() if callable(config) else {"name": label})
        return {"name": self.name, "method": self.settings.method, "norm": self.settings.norm,
                "rrf_k": self.settings.rrf_k, "weights": list(self.settings.weights or ()) or None,
                "depth": self.depth, "retrievers": parts}

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        """Every retriever's top ``max(depth, k)`` for all queries, fused, cut to ``k``."""
        k = check_int(k, "k", 1, MAX_DEPTH)
        if not queries:
            return []
        depth = max(self.depth, k)
        stage = []
        for label, retriever in zip(self.labels, self.retrievers, strict=True):
            columns = _columns(retriever, list(queries), depth)
            if len(columns) != len(queries):
                raise EvretError(f"{_WHERE}: retriever {label!r} returned {len(columns)} rankings for "
                                 f"{len(queries)} queries")
            stage.append(columns)
        fused = fuse_columns(stage, self.settings)
        out = []
        for q, (ids, scores) in enumerate(fused):
            ids, scores = ids[:k], scores[:k]
            texts = _texts(ids, [run[q] for run in stage])
            out.append(RankedColumns(ids.tolist(), scores, texts))
        return out

    def batch_retrieve(self, queries: Sequence[str], k: int) -> list[list[RetrievalResult]]:
        return [columns.to_results() for columns in self.batch_retrieve_columns(queries, k)]

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return self.batch_retrieve([query], k)[0]


def _columns(retriever: Any, queries: list[str], k: int) -> list[RankedColumns]:
    method = getattr(retriever, "batch_retrieve_columns", None)
    if callable(method):
        return list(method(queries, k))
    from evret_core.contracts.retrieve import call_batch_retrieve, coerce_results

    return [RankedColumns.from_results(coerce_results(results, f"{_WHERE}: retriever {type(retriever).__name__}"))
            for results in call_batch_retrieve(retriever, queries, k)]


def _texts(ids: Any, rankings: Sequence[RankedColumns]) -> list[str | None] | None:
    """Each fused id's text from the first ranking that has one (None when no retriever gave texts)."""
    if all(r.texts is None for r in rankings):
        return None
    found: dict[Any, str | None] = {}
    for ranking in reversed(rankings):  # the first retriever wins: written last
        if ranking.texts is not None:
            found.update((doc, text) for doc, text in zip(ranking.ids, ranking.texts, strict=True)
                         if text is not None)
    return [found.get(doc) for doc in ids]


def _specs(retrievers: Any) -> list[tuple[str, dict[str, Any]]]:
    """The ``retrievers`` option checked: a list of at least two tables of ``name`` and optional ``options``."""
    if isinstance(retrievers, str | bytes | Mapping) or not isinstance(retrievers, Sequence):
        raise EvretError(f"{_WHERE}: option retrievers must be a list of tables with a name and options, "
                         f"e.g. [{{name = \"bm25\"}}, {{name = \"dense\"}}], got {retrievers!r}")
    if len(retrievers) < 2:
        raise EvretError(f"{_WHERE}: option retrievers needs at least two retrievers, got {len(retrievers)}")
    specs = []
    for i, spec in enumerate(retrievers):
        where = f"{_WHERE}: option retrievers[{i}]"
        if isinstance(spec, str):
            spec = {"name": spec}
        if not isinstance(spec, Mapping):
            raise EvretError(f"{where} must be a table with a name (and options), got {spec!r}")
        extra = sorted(set(spec) - {"name", "options"})
        if extra:
            raise EvretError(f"{where} has {', '.join(map(repr, extra))}: a retriever table takes name and "
                             f"options (write its options under options)")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise EvretError(f"{where} needs a name (a registered retriever)")
        if name == "hybrid":
            raise EvretError(f"{where}: a hybrid inside a hybrid is not supported; list its retrievers instead")
        options = spec.get("options", {})
        if not isinstance(options, Mapping):
            raise EvretError(f"{where}: options must be a table, got {options!r}")
        specs.append((name, dict(options)))
    return specs


def _sources(i: int, options: Mapping[str, Any]) -> dict[str, str]:
    return {option: f"hybrid retrievers[{i}] options" for option in options}
