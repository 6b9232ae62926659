"""Results files of either kind: `load_results` reads a retrieval or a RAG results file (any schema version this Evret
reads) and returns the matching :class:`~evret_core.results.model.Results`.

Every reader of results files (``evret compare``, ``evret report``, ``--baseline`` of ``evret evaluate`` and
``evret rag``, ``evret calibrate``, the pytest plugin's baseline) goes through it, so a file is recognised, checked
and refused the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.jsonio import read_document
from evret_core.results.conversation_results import CONVERSATION_SCHEMA, ConversationResults
from evret_core.results.evaluation import EvaluationResults
from evret_core.results.model import Results
from evret_core.results.rag_results import RAG_SCHEMA, RagResults
from evret_core.results.trace_results import TRACE_SCHEMA, TraceResults

__all__ = ["KINDS", "kind_of", "load_results", "load_runs", "run_names"]

KINDS: dict[str, type[Results]] = {"retrieval": EvaluationResults, "rag": RagResults, "trace": TraceResults,
                                   "conversation": ConversationResults}
"""Each kind of results, by :attr:`Results.KIND`."""


def kind_of(document: Any) -> type[Results]:
    """The results class of a parsed results document: RAG results carry ``"schema": "evret-rag"``, agent-trace
    results ``"schema": "evret-trace"``, conversation results ``"schema": "evret-conversation"``, retrieval results
    no ``schema`` (their schema predates it)."""
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema == TRACE_SCHEMA:
        return TraceResults
    if schema == CONVERSATION_SCHEMA:
        return ConversationResults
    return RagResults if schema == RAG_SCHEMA else EvaluationResults


def load_results(path_or_text: str | Path, kind: str | None = None) -> Results:
    """The results in ``path_or_text`` (a path, or the JSON text itself), of whichever kind the file holds:
    :class:`EvaluationResults` or :class:`RagResults`, their schema version checked (earlier versions load), their
    numbers checked. With ``kind`` (``retrieval`` or ``rag``), a file of the other kind is an error naming it.
    Errors are :class:`EvretError` s naming the file (and the query or question, and the score). A retrieval
    file's ``per_query`` is read as columns (:mod:`evret_core.results.stored`): the file is held in about its own
    size, and a query's record is built when it is looked up."""

    def checked(data: Any, source: str) -> type[Results]:
        cls = kind_of(data)
        if kind is not None and cls.KIND != kind:
            if kind not in KINDS:
                raise EvretError(f"unknown results kind {kind!r}; use one of {', '.join(KINDS)}")
            raise EvretError(f"{source}: is a {cls.KIND} results file; {kind} results are needed here")
        return cls

    from evret_core.results.stored import read_results

    read = read_results(path_or_text)
    if read is None:  # read whole, as every other document
        data, source = read_document(path_or_text)
        return checked(data, source).from_document(data, source)
    head, stored, source = read
    cls = checked(head, source)
    return cls.from_document(head, source) if stored is None else EvaluationResults.from_stored(head, stored, source)


def run_names(paths: Sequence[str | Path]) -> list[str]:
    """Each results file's name without its suffix; repeated names get ``#1``, ``#2``."""
    stems = [Path(p).stem for p in paths]
    return [s if stems.count(s) == 1 else f"{s}#{i + 1}" for i, s in enumerate(stems)]


def load_runs(paths: Sequence[str | Path], what: str = "results file") -> dict[str, Results]:
    """Results files by run name (the file name without suffix; repeated names get ``#1``, ``#2``), all of one
    kind: a mix of retrieval and RAG runs is an error (they share no scores to compare)."""
    if not paths:
        raise EvretError(f"give at least one {what}")
    runs = {name: load_results(p) for name, p in zip(run_names(paths), paths, strict=True)}
    if len({type(r) for r in runs.values()}) > 1:
        raise EvretError("compare RAG runs (evret rag) with RAG runs and retrieval runs with retrieval runs")
    return runs
